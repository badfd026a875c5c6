"""The engine: the turn loop, its guards, the stream accumulator and the tool executor."""
