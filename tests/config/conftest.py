from tests.config.helpers import dirs

__all__ = ["dirs"]
