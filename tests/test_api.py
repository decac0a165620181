from __future__ import annotations

import subprocess
import sys

import prime_memory_folding


def test_all_is_sorted_and_complete() -> None:
    import types

    names = prime_memory_folding.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(prime_memory_folding, name) is not None
    exported = {
        name
        for name, value in vars(prime_memory_folding).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", "").startswith("prime_memory_folding")
    }
    assert exported <= set(names)


def test_every_error_derives_from_the_base() -> None:
    from prime_memory_folding import errors

    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.PrimeMemoryError)


def test_importing_the_package_does_not_load_numpy() -> None:
    code = "import sys, prime_memory_folding; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
