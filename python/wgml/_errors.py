"""wgml.Error and its subclasses, one per wgml_status of include/wgml.h."""
from __future__ import annotations

from typing import Dict, Type


class Error(Exception):
    """A failed call of the library. ``message`` is the library's own message
    (wgml_error.message: it names the file, tensor, parameter ...), ``code``
    the wgml_status number and ``status`` its name ("out of memory", ...)."""

    code: int = 0

    def __init__(self, message: str, code: int = 0, status: str = "") -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.status = status

    def __str__(self) -> str:
        return self.message


class InvalidArgument(Error, ValueError):
    """WGML_ERR_INVALID_ARGUMENT: a parameter out of range, or missing."""
    code = 1


class FileError(Error):
    """WGML_ERR_IO: a file could not be opened, read or written."""
    code = 2


class FormatError(Error):
    """WGML_ERR_FORMAT: a file is corrupt or not what it claims to be."""
    code = 3


class Unsupported(Error):
    """WGML_ERR_UNSUPPORTED: valid input the library does not handle (an
    architecture, a type, a task the model does not have)."""
    code = 4


class OutOfMemory(Error, MemoryError):
    """WGML_ERR_OUT_OF_MEMORY: a host allocation failed."""
    code = 5


class ContextFull(Error):
    """WGML_ERR_CONTEXT_FULL: the tokens do not fit in the context."""
    code = 6


class GpuError(Error):
    """WGML_ERR_GPU: a WebGPU call failed (validation, shader, out of memory)."""
    code = 7


class DeviceLost(GpuError):
    """WGML_ERR_DEVICE_LOST: the GPU device was lost; close the model."""
    code = 8


class NoAdapter(Error):
    """WGML_ERR_NO_ADAPTER: no usable GPU adapter."""
    code = 9


class TokenizerError(Error):
    """WGML_ERR_TOKENIZER: the text cannot be tokenized with this vocabulary."""
    code = 10


class TemplateError(Error):
    """WGML_ERR_TEMPLATE: a chat template failed or refused the messages."""
    code = 11


class NetworkError(Error, ConnectionError):
    """WGML_ERR_NETWORK: a model by URL could not be downloaded (no connection,
    an HTTP error such as 404, or a file failing its size or SHA-256 check)."""
    code = 12


_BY_CODE: Dict[int, Type[Error]] = {c.code: c for c in (InvalidArgument, FileError, FormatError, Unsupported,
                                                          OutOfMemory, ContextFull, GpuError, DeviceLost, NoAdapter,
                                                          TokenizerError, TemplateError, NetworkError)}


def error_for(code: int, message: str, status: str = "") -> Error:
    """The exception for a wgml_status (Error itself for a code this package does not know)."""
    cls = _BY_CODE.get(code, Error)
    return cls(message, code, status)
