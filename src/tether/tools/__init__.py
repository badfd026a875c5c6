"""Tools: the Tool type and @tool, argument schemas and validation, the registry."""
