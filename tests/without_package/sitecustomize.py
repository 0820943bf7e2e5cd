"""Put on PYTHONPATH with $EMBSCOPE_TEST_WITHOUT=name: the process runs as if that package were not installed.
Every import finder is asked through a wrapper that finds nothing for it, so `import name` raises
ModuleNotFoundError and importlib.util.find_spec(name) is None, as on a machine without it."""

import os
import sys

WITHOUT = os.environ.get("EMBSCOPE_TEST_WITHOUT", "")


class Without:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name == WITHOUT or name.startswith(WITHOUT + "."):
            return None
        find = getattr(self.finder, "find_spec", None)
        return find(name, path, target) if find is not None else None

    def __getattr__(self, attribute):  # invalidate_caches and the like go to the finder itself
        return getattr(self.finder, attribute)


if WITHOUT:
    sys.meta_path[:] = [Without(finder) for finder in sys.meta_path]
