"""Exceptions raised by pydeepum.  Everything a user can cause by bad input is
a DeepumInputError (the CLI exits with status 2 for those)."""

from __future__ import annotations


class DeepumError(Exception):
    """Base class of pydeepum's own errors."""


class DeepumInputError(DeepumError, ValueError):
    """The input (file, option, record) is not acceptable."""


class TraceFormatError(DeepumInputError):
    """A trace or capture file is malformed, truncated or of an unknown version."""


class ConfigError(DeepumInputError):
    """A configuration value is outside its documented range."""


class RecordError(DeepumInputError):
    """The prefetch core rejected a record."""

    def __init__(self, index: int, message: str):
        super().__init__(f"record {index}: {message}")
        self.index = index


class ModuleError(DeepumInputError):
    """deepum.ko cannot be loaded or unloaded as asked: not root, not found, in use."""


class DeviceError(DeepumError, OSError):
    """/dev/deepum refused an open or an ioctl: DeviceError(errno, message);
    .errno says why, str() says it in words."""

    def __str__(self) -> str:
        return str(self.strerror)


class ModuleNotLoadedError(DeviceError, DeepumInputError):
    """There is no /dev/deepum: the module is not loaded."""


class DevicePermissionError(DeviceError, PermissionError, DeepumInputError):
    """EACCES or EPERM: not allowed to open /dev/deepum, to change the defaults
    (CAP_SYS_ADMIN), to use another process's context, or to use the test
    ioctls of a module loaded without enable_test_ioctls=1."""


class ProtocolError(DeviceError):
    """EPROTO, or a handshake the module refused: the caller and the module
    do not speak the same API."""


class NotAttachedError(DeviceError):
    """ENOTCONN: the file has no context yet (Device.attach())."""


class AlreadyAttachedError(DeviceError):
    """EBUSY: the file is already bound to a context."""


class DeviceInputError(DeviceError, DeepumInputError):
    """EINVAL or E2BIG: the module refused an argument."""


class DeviceMemoryError(DeviceError, MemoryError):
    """ENOMEM: the module had no memory for what was asked (the old state stays)."""
