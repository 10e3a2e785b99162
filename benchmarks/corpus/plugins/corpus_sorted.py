"""A pytest plugin for a suite that orders its tests at random on purpose (sh's unittest loader sorts by
a hash salted with os.urandom): the tests in node id order, the same in every process, so that xdist's
workers collect the same list (it refuses to run otherwise) and plain and recorded runs run alike."""

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid)
