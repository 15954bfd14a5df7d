"""The contract suite lives in ``store_contract.py``, imported by each backend's test
module: have pytest rewrite its asserts, so a failure shows the values compared."""

import pytest

pytest.register_assert_rewrite("store_contract")
