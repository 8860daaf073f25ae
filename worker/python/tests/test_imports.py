"""Every module imports, and every annotation of the public API resolves
(the stand-in for a type checker: mypy and pyright are not installed)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
import unittest

import flowd


def _modules() -> list:
    names = ["flowd"] + [f"flowd.{m.name}" for m in pkgutil.iter_modules(flowd.__path__)]
    return [importlib.import_module(n) for n in names]


class ImportTest(unittest.TestCase):
    def test_every_module_imports(self) -> None:
        names = {m.__name__ for m in _modules()}
        for want in ("flowd.client", "flowd.worker", "flowd.errors", "flowd._conn", "flowd._logs",
                     "flowd._route", "flowd._yaml", "flowd._task", "flowd._heartbeats", "flowd.__main__"):
            self.assertIn(want, names)

    def test_annotations_resolve(self) -> None:
        checked = 0
        for mod in _modules():
            for name, obj in vars(mod).items():
                if getattr(obj, "__module__", None) != mod.__name__:
                    continue
                targets = [obj]
                if inspect.isclass(obj):
                    targets += [v for v in vars(obj).values() if inspect.isfunction(v)]
                for t in targets:
                    if inspect.isfunction(t) or inspect.isclass(t):
                        with self.subTest(f"{mod.__name__}.{getattr(t, '__qualname__', name)}"):
                            # names imported only for type checking (TYPE_CHECKING) come from the package
                            typing.get_type_hints(t, {**vars(flowd), **vars(mod)})
                            checked += 1
                    if inspect.isfunction(t) and not name.startswith("_") and not t.__name__.startswith("_"):
                        sig = inspect.signature(t)
                        missing = [p for p in sig.parameters.values()
                                   if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
                        self.assertEqual(missing, [], f"{mod.__name__}.{t.__qualname__}: unannotated parameters")
                        self.assertIsNot(sig.return_annotation, inspect.Signature.empty,
                                         f"{mod.__name__}.{t.__qualname__}: no return annotation")
        self.assertGreater(checked, 50)

    def test_public_names(self) -> None:
        for n in flowd.__all__:
            self.assertTrue(hasattr(flowd, n), n)
        self.assertTrue(issubclass(flowd.NotFound, flowd.RPCError))
        self.assertEqual(flowd.Unavailable.code, -32004)

    def test_py_typed_marker(self) -> None:
        import os
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(flowd.__file__), "py.typed")))


if __name__ == "__main__":
    unittest.main()
