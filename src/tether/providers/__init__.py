"""Providers: one module per wire protocol, behind the Provider protocol of base.py."""
