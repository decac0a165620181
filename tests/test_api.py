from __future__ import annotations

import subprocess
import sys

import prime_memory_folding


def test_all_is_sorted_and_complete() -> None:
    names = prime_memory_folding.__all__
    assert names == sorted(names)
    public = {n for n in dir(prime_memory_folding) if not n.startswith("_")} - {
        "address",
        "errors",
        "primes",
        "records",
        "annotations",
        "TYPE_CHECKING",
        "Any",
    }
    for name in names:
        assert getattr(prime_memory_folding, name) is not None
    assert public <= set(names) | {"engine", "index", "query", "storage"}


def test_every_error_derives_from_the_base() -> None:
    from prime_memory_folding import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.PrimeMemoryError)


def test_importing_the_package_does_not_load_numpy() -> None:
    code = "import sys, prime_memory_folding; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
