"""Recorded provider traffic (``tests/fixtures/wire/``) and the local server that replays it."""
