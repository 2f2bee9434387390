"""One vocabulary of command-line options for every tool that talks to Triton.

`trt-plugin-kit serve`, `python -m clients`, `python -m loadtests`, `python -m loadtests.soak` and the Locust
file define their shared options through the functions below, so that one thing has one flag, one meaning and
one environment variable everywhere (a flag wins over its variable):

    --host                      TRITON_HOST          server address (serve.py: the address to bind)
    --http-port / --grpc-port   TRITON_HTTP_PORT / TRITON_GRPC_PORT
    --metrics-port              TRITON_METRICS_PORT
    --url                       -                    one endpoint: http://HOST:PORT or grpc://HOST:PORT
                                                     (scheme = protocol; https/grpcs: TLS), or HOST:PORT
    --protocol                  TRITON_PROTOCOL      grpc or http (load tests: a list or a weighted mix)
    --timeout                   per tool             seconds one request may take
    --admin-key                 TRITON_ADMIN_KEY     the key of the server's restricted APIs
    --mnist-dir                 MNIST_DIR            folder with the MNIST dev digits

A bad value, on the command line or in the environment, ends in argparse's usage error (exit code 2) with a
message that names where it came from, e.g. `argument --grpc-port: $TRITON_GRPC_PORT='x': not a port number`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trt_plugin_kit.interface import (
    ADMIN_KEY_ENV,
    DEFAULT_GRPC_PORT,
    DEFAULT_HOST,
    DEFAULT_HTTP_PORT,
    DEFAULT_METRICS_PORT,
    GRPC_PORT_ENV,
    HOST_ENV,
    HTTP_PORT_ENV,
    METRICS_PORT_ENV,
    MNIST_DIR,
    MNIST_DIR_ENV,
    PROTOCOL_ENV,
    PROTOCOLS,
    SHARED_DIR,
    URL_SCHEMES,
    VARIANT_ENV,
    VARIANTS,
)

DEFAULT_PORTS = {"http": DEFAULT_HTTP_PORT, "grpc": DEFAULT_GRPC_PORT}
PORT_FLAGS = {"http": ("--http-port", HTTP_PORT_ENV), "grpc": ("--grpc-port", GRPC_PORT_ENV)}


# --------------------------------------------------------------------------- values from the environment
class EnvValue(str):
    """A default read from an environment variable. argparse passes string defaults through the option's
    `type`, so a bad value fails like a bad flag; the converters below then name the variable."""

    variable: str

    def __new__(cls, value: str, variable: str) -> EnvValue:
        text = super().__new__(cls, value)
        text.variable = variable
        return text


def env_default(variable: str, default: Any = None) -> Any:
    """The variable's text (for the option's type to convert) when it is set and not empty, else default."""
    value = os.environ.get(variable)
    return EnvValue(value, variable) if value not in (None, "") else default


def from_environment(value: Any) -> bool:
    return isinstance(value, EnvValue)


def converter(function: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse `type` from a function that raises ValueError with a reason; the message names the
    environment variable when the text came from one."""

    def convert(text: str) -> Any:
        try:
            return function(text)
        except (ValueError, argparse.ArgumentTypeError) as error:
            if isinstance(text, EnvValue):
                raise argparse.ArgumentTypeError(f"${text.variable}={str(text)!r}: {error}") from None
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = function.__name__
    return convert


# ------------------------------------------------------------------------------------------ value checks
def _number(text: str, kind: type, what: str):
    try:
        return kind(str(text).strip())
    except ValueError:
        raise ValueError(f"expected {what}, got {str(text)!r}") from None


def _checked(kind: type, what: str, holds, rule: str):
    """A parser of `kind` for argparse and the environment: `rule` (with {value}) says what `holds` wants."""

    def parse(text: str):
        value = _number(text, kind, what)
        if not holds(value):
            raise ValueError(rule.format(value=value if kind is int else text))
        return value

    return parse


port_number = _checked(
    int, "a port number", lambda v: 1 <= v <= 65535, "a port number is 1 to 65535, got {value}"
)
positive_int = _checked(int, "a whole number", lambda v: v >= 1, "must be at least 1, got {value}")
non_negative_int = _checked(int, "a whole number", lambda v: v >= 0, "must be 0 or more, got {value}")
positive_seconds = _checked(float, "a number of seconds", lambda v: v > 0, "must be more than 0, got {value}")
non_negative_float = _checked(float, "a number", lambda v: v >= 0, "must be 0 or more, got {value}")
requests_per_second = _checked(
    float, "a number of requests per second", lambda v: 0 < v < math.inf, "must be more than 0, got {value}"
)
fraction = _checked(
    float,
    "a fraction between 0 and 1",
    lambda v: 0.0 <= v <= 1.0,
    "expected a fraction between 0 and 1, got {value}",
)


def host_name(text: str) -> str:
    value = str(text).strip()
    if not value or "/" in value or " " in value:
        raise ValueError(f"expected a host name or address (for a URL use --url), got {str(text)!r}")
    return value


def protocol_name(text: str) -> str:
    if str(text).strip().lower() not in PROTOCOLS:
        raise ValueError(f"expected one of {', '.join(PROTOCOLS)}, got {str(text)!r}")
    # Keeps an EnvValue an EnvValue: a --url scheme wins over the environment, not over a flag.
    return text if str(text) in PROTOCOLS else str(text).strip().lower()


def parse_weights(text: str, allowed: Iterable[str], what: str) -> dict[str, int]:
    """A mix such as "http=3,grpc=1" or "http,grpc" (a bare name weighs 1) as {name: weight}; every allowed
    name is in the result (0 when not given) and at least one weight is positive."""
    allowed = tuple(allowed)
    weights = dict.fromkeys(allowed, 0)
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if name not in allowed:
            raise ValueError(
                f"unknown {what} {name!r} in {str(text)!r}; expected names from {', '.join(allowed)}"
            )
        try:
            weight = int(value) if sep else 1
        except ValueError:
            raise ValueError(f"{what} weight for {name!r} must be a whole number, got {value!r}") from None
        if weight < 0:
            raise ValueError(f"{what} weight for {name!r} must be >= 0, got {weight}")
        weights[name] = weight
    if not any(weights.values()):
        raise ValueError(f"{what} mix {str(text)!r} gives no positive weight; use e.g. {allowed[0]}=1")
    return weights


def protocol_mix(text: str) -> dict[str, int]:
    return parse_weights(text, ("http", "grpc"), "protocol")


def directory(text: str) -> Path:
    if not str(text).strip():
        raise ValueError("expected a folder")
    return Path(str(text))


# ----------------------------------------------------------------------------------- where the server is
def format_address(host: str, port: int) -> str:
    """HOST:PORT as tritonclient takes it ([::1]:8001 for IPv6)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


@dataclass(frozen=True)
class ServerLocation:
    """Where one Triton server listens (both protocols and metrics)."""

    host: str = DEFAULT_HOST
    http_port: int = DEFAULT_HTTP_PORT
    grpc_port: int = DEFAULT_GRPC_PORT
    metrics_port: int = DEFAULT_METRICS_PORT

    def port(self, protocol: str) -> int:
        return self.http_port if protocol == "http" else self.grpc_port

    def address(self, protocol: str) -> str:
        return format_address(self.host, self.port(protocol))

    @property
    def metrics_url(self) -> str:
        return f"http://{format_address(self.host, self.metrics_port)}/metrics"

    def describe(self) -> str:
        return f"HTTP {self.address('http')} / gRPC {self.address('grpc')}"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServerLocation:
        return cls(
            args.host,
            args.http_port,
            args.grpc_port,
            getattr(args, "metrics_port", DEFAULT_METRICS_PORT),
        )


@dataclass(frozen=True)
class Endpoint:
    """One endpoint of one protocol: what the clients connect to."""

    protocol: str
    host: str
    port: int
    tls: bool = False

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)


def parse_url(text: str) -> tuple[str | None, str, int, bool]:
    """`http://HOST:PORT`, `grpc://HOST:PORT`, `https://`/`grpcs://` (TLS) or `HOST:PORT` ->
    (protocol the scheme implies or None, host, port, TLS asked for). Raises ValueError with the reason."""
    url = str(text).strip().rstrip("/")
    protocol, tls = None, False
    if "://" in url:
        scheme, _, url = url.partition("://")
        if scheme.lower() not in URL_SCHEMES:
            raise ValueError(
                f"--url {str(text)!r}: unknown scheme {scheme!r}; use http://, grpc://, https://, grpcs:// "
                "or HOST:PORT"
            )
        protocol, tls = URL_SCHEMES[scheme.lower()]
    host, sep, port = url.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or "/" in url:
        raise ValueError(f"--url {str(text)!r}: expected HOST:PORT, e.g. {DEFAULT_HOST}:{DEFAULT_GRPC_PORT}")
    try:
        return protocol, host, port_number(port), tls
    except ValueError as error:
        raise ValueError(f"--url {str(text)!r}: {error}") from None


def endpoint_from_args(args: argparse.Namespace, default_protocol: str = "grpc") -> Endpoint:
    """The one endpoint a client talks to, from --url / --protocol / --host / --http-port / --grpc-port.

    A --url scheme sets the protocol (a --protocol flag that says otherwise is an error; $TRITON_PROTOCOL just
    yields); without --url the endpoint is --host and the port of the protocol."""
    chosen = args.protocol
    if args.url:
        implied, host, port, tls = parse_url(args.url)
        if implied and chosen and implied != chosen and not from_environment(chosen):
            raise ValueError(
                f"--url {args.url} is {'an HTTP' if implied == 'http' else 'a gRPC'} URL but --protocol is "
                f"{chosen}: give only one of them"
            )
        return Endpoint(implied or str(chosen or default_protocol), host, port, tls)
    protocol = str(chosen or default_protocol)
    return Endpoint(protocol, args.host, args.grpc_port if protocol == "grpc" else args.http_port)


# ------------------------------------------------------------------------------------------- the options
def _shown(default: Any) -> str:
    if isinstance(default, float):
        return f"{default:g}"
    if isinstance(default, (list, tuple)):
        return ",".join(str(item) for item in default)
    return str(default)


def add_env_argument(
    group: Any,
    flag: str,
    *,
    variable: str | None,
    default: Any,
    convert: Callable[[str], Any],
    metavar: str,
    help: str,
    shown: str | None = None,
) -> None:
    """An option read from the command line, else from $variable (when set and not empty), else `default`.

    `convert` checks the text of both (a bad value names the variable it came from); the help ends in
    "(default: D; $VARIABLE)", D being `shown` or the default as a user would type it."""
    where = f"; ${variable}" if variable else ""
    group.add_argument(
        flag,
        type=converter(convert),
        default=env_default(variable, default) if variable else default,
        metavar=metavar,
        help=f"{help} (default: {_shown(default) if shown is None else shown}{where})",
    )


def add_server_location_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    metrics: bool = False,
    bind: bool = False,
    host: bool = True,
) -> Any:
    """--host, --http-port, --grpc-port (and --metrics-port) with their TRITON_* variables.

    `bind`: the options say where a server listens (serve.py) rather than where a client connects.
    `host=False`: leave --host out (Locust has its own --host, which the locustfile reads)."""
    group = (
        parser.add_argument_group("server location")
        if isinstance(parser, argparse.ArgumentParser)
        else parser
    )
    host_help = (
        "address to bind (0.0.0.0: all interfaces)" if bind else "host name or address of the Triton server"
    )
    if host:
        add_env_argument(
            group,
            "--host",
            variable=HOST_ENV,
            default=DEFAULT_HOST,
            convert=host_name,
            metavar="HOST",
            help=host_help,
        )
    ports = [("http", HTTP_PORT_ENV, DEFAULT_HTTP_PORT), ("grpc", GRPC_PORT_ENV, DEFAULT_GRPC_PORT)]
    if metrics:
        ports.append(("metrics", METRICS_PORT_ENV, DEFAULT_METRICS_PORT))
    names = {"http": "HTTP", "grpc": "gRPC", "metrics": "metrics (Prometheus)"}
    for name, variable, default in ports:
        add_env_argument(
            group,
            f"--{name}-port",
            variable=variable,
            default=default,
            convert=port_number,
            metavar="PORT",
            help=f"{names[name]} port",
        )
    return group


def add_url_argument(group: Any) -> None:
    group.add_argument(
        "--url",
        default=None,
        metavar="URL",
        help="one endpoint instead of --host/--*-port: http://HOST:PORT or grpc://HOST:PORT (the scheme "
        "picks the protocol; https://, grpcs://: TLS), or HOST:PORT with --protocol",
    )


def add_protocol_argument(group: Any, *, mix: bool = False, default: str | None = None) -> None:
    """Clients: `--protocol grpc|http`. Load tests (`mix`): a list or a weighted mix, e.g. `http=3,grpc=1`."""
    if mix:
        add_env_argument(
            group,
            "--protocol",
            variable=PROTOCOL_ENV,
            default=default or "http,grpc",
            convert=protocol_mix,
            metavar="MIX",
            help="protocols to use: grpc, http, both (http,grpc) or a share of users per protocol such as "
            "http=3,grpc=1",
        )
        return
    add_env_argument(
        group,
        "--protocol",
        variable=PROTOCOL_ENV,
        default=default,
        convert=protocol_name,
        metavar="{grpc,http}",
        help="protocol to talk to Triton with",
        shown="the --url scheme, else grpc" if default is None else None,
    )


def add_server_variant_argument(group: Any, *aliases: str, when: str = "with --start-server: ") -> None:
    """--server-variant of the tools that start a server of their own (always, or with --start-server);
    `aliases`: older spellings of the same flag that still parse."""
    group.add_argument(
        "--server-variant",
        *aliases,
        dest="server_variant",
        choices=("auto", *VARIANTS),
        default=os.environ.get(VARIANT_ENV, "auto"),
        help=f"{when}which server, as for `make serve` (default: auto; ${VARIANT_ENV})",
    )


def add_timeout_argument(group: Any, default: float, variable: str | None = None) -> None:
    add_env_argument(
        group,
        "--timeout",
        variable=variable,
        default=default,
        convert=positive_seconds,
        metavar="SECONDS",
        help="seconds one request may take before it counts as failed",
    )


def add_admin_key_argument(group: Any) -> None:
    group.add_argument(
        "--admin-key",
        default=env_default(ADMIN_KEY_ENV, None),
        metavar="KEY",
        help=f"the admin key the server was started with (its ${ADMIN_KEY_ENV}), for restricted APIs such "
        f"as shared memory (default: ${ADMIN_KEY_ENV})",
    )


def add_mnist_dir_argument(group: Any, purpose: str) -> None:
    group.add_argument(
        "--mnist-dir",
        type=converter(directory),
        default=None,
        metavar="DIR",
        help=f"folder with the MNIST dev digits (mnist-dev-*-ubyte.gz), {purpose} "
        f"(default: ${MNIST_DIR_ENV}, else ../{MNIST_DIR.relative_to(SHARED_DIR.parent)})",
    )


def run_reporting_input_errors(command: Callable[[list[str] | None], int], argv: list[str] | None) -> int:
    """Runs a command whose missing or malformed input files end with one clear line and exit code 2
    (IdxFormatError and bad weights are ValueErrors) instead of a traceback."""
    try:
        return command(argv)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


# Options whose value may start with "-" (a range such as -1:1), which argparse before Python 3.13 reads as a
# flag ("expected one argument") unless written --range=-1:1.
RANGE_FLAGS = ("--range", "--model-range")


def join_negative_values(argv: Sequence[str], flags: Sequence[str] = RANGE_FLAGS) -> list[str]:
    """argv with `--range -1:1` written as `--range=-1:1`, which every argparse reads as the value."""
    joined, i = [], 0
    while i < len(argv):
        if (
            argv[i] in flags
            and i + 1 < len(argv)
            and argv[i + 1].startswith("-")
            and argv[i + 1][1:2].isdigit()
        ):
            joined.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        if argv[i] == "--":  # what follows is not ours
            joined += argv[i:]
            break
        joined.append(argv[i])
        i += 1
    return joined
