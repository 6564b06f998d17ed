"""The one message for an optional dependency that is not installed."""


def missing(error: ImportError, module: str, package: str, install: str) -> ImportError:
    """``error`` (an ImportError from importing ``package``) as a ModuleNotFoundError that says
    what to install, when ``package`` itself is what is missing; otherwise ``error`` itself (a
    package that is installed but fails to import says why)."""
    name = getattr(error, "name", None) or ""
    if isinstance(error, ModuleNotFoundError) and (name == package or name.startswith(package + ".")):
        return ModuleNotFoundError(f"{module} needs {package}, which is not installed: {install}", name=package)
    return error
