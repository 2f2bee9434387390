"""`python -m clients <command>`: infer, l2norm, eval, health, tensor, with the same connection flags on each.

Every command checks the server and the model (readiness, tensor names, dtypes, shapes) before it sends
data, and every failure ends with one readable `error: ...` line block on stderr and a distinct exit code
(see clients/errors.py and clients/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import sys
import textwrap
from collections.abc import Callable, Sequence

from clients import errors, shm
from clients.shm import SHARED_MEMORY_KINDS
from clients.tritonserver import DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, ConnectionSettings
from trt_plugin_kit.interface import MNIST_DIR, MNIST_DIR_ENV, SHARED_DIR, admin_header
from trt_plugin_kit.tritonserver import options as cli_options
from trt_plugin_kit.tritonserver.model_io import value_range
from trt_plugin_kit.tritonserver.options import (
    converter,
    fraction,
    join_negative_values,
    non_negative_int,
    positive_int,
)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows meaningful defaults in --help (not None/False/empty) and keeps the examples' line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        unset = default is None or default is False or default == argparse.SUPPRESS
        if "default" in text or unset or (isinstance(default, (str, list)) and not default):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            text += " (default: %(default)s)"
        return text


def _paragraph(text: str) -> str:
    """Descriptions are wrapped here because the formatter keeps line breaks (for the examples)."""
    return textwrap.fill(text, width=100)


def _header_like(form: str):
    """KEY=VALUE pairs (--header, --input) with the form named in the error."""

    def parse(text: str) -> tuple[str, str]:
        key, sep, value = text.partition("=")
        if not sep or not key.strip() or not value:
            raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
        return key.strip(), value

    return parse


def _header(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


_positive_int = converter(positive_int)
_non_negative_int = converter(non_negative_int)
_fraction = converter(fraction)


def _connection_parser() -> argparse.ArgumentParser:
    """Flags every command shares (long options only, same meaning everywhere)."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("connection")
    cli_options.add_url_argument(group)
    cli_options.add_protocol_argument(group)
    cli_options.add_server_location_arguments(group)
    group.add_argument(
        "--model-version", default="", metavar="VERSION", help="model version ('' = server's choice)"
    )
    cli_options.add_timeout_argument(group, DEFAULT_TIMEOUT_S)
    group.add_argument(
        "--retries",
        type=_non_negative_int,
        metavar="N",
        default=DEFAULT_RETRIES,
        help="retries (exponential backoff) when the server cannot be reached; timeouts are not retried",
    )
    group.add_argument(
        "--header",
        type=_header,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra HTTP header / gRPC metadata sent with every request (repeatable)",
    )
    cli_options.add_admin_key_argument(group)
    tls = parser.add_argument_group("TLS")
    tls.add_argument("--ssl", action="store_true", help="use TLS (HTTPS / secure gRPC channel)")
    tls.add_argument(
        "--root-certificates", metavar="FILE", help="PEM CA certificates to verify the server with"
    )
    tls.add_argument("--private-key", metavar="FILE", help="PEM private key for client authentication")
    tls.add_argument("--certificate-chain", metavar="FILE", help="PEM client certificate chain")
    tls.add_argument(
        "--insecure", action="store_true", help="HTTPS only: do not verify the server certificate"
    )
    parser.add_argument("--verbose", action="store_true", help="print tritonclient's request/response traces")
    return parser


def _shared_memory_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("shared memory")
    group.add_argument(
        "--shared-memory",
        choices=SHARED_MEMORY_KINDS,
        default="none",
        help="pass tensors through shared memory: system (client on the server's host) or cuda (needs a GPU "
        "and cuda-python)",
    )
    group.add_argument(
        "--cuda-device", type=_non_negative_int, default=0, metavar="ID", help="GPU for --shared-memory cuda"
    )


def _sending_arguments(parser: argparse.ArgumentParser, batch_size: int, what: str) -> None:
    """--batch-size, --concurrency and the shared-memory flags of the commands that send data."""
    parser.add_argument(
        "--batch-size", type=_positive_int, default=batch_size, metavar="N", help=f"{what} per request"
    )
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        default=4,
        metavar="N",
        help="requests in flight at the same time",
    )
    _shared_memory_arguments(parser)


# The sub-commands in --help order: name -> the function that adds its flags, whose docstring is its help.
_COMMANDS: dict[str, Callable[[argparse.ArgumentParser], None]] = {}


def _subcommand(name: str):
    """Registers the decorated function as sub-command `name`'s flags. Its docstring is the command's help:
    the one-line summary (the command list), a description paragraph, then `examples:`, one a line."""

    def register(add_flags: Callable[[argparse.ArgumentParser], None]):
        _COMMANDS[name] = add_flags
        return add_flags

    return register


def _add_command(
    commands: argparse._SubParsersAction,
    common: argparse.ArgumentParser,
    name: str,
    add_flags: Callable[[argparse.ArgumentParser], None],
) -> None:
    """A sub-command with the connection flags, its own flags and the help its flags' docstring gives."""
    summary, description, examples = inspect.cleandoc(add_flags.__doc__ or "").split("\n\n", 2)
    add_flags(
        commands.add_parser(
            name,
            parents=[common],
            formatter_class=_HelpFormatter,
            help=summary,
            description=_paragraph(" ".join(description.split())),
            epilog=examples,
        )
    )


@_subcommand("infer")
def _infer_flags(infer: argparse.ArgumentParser) -> None:
    """classify digit images (top-k with labels)

    Classify images: encoded PNG/JPEG bytes to mnist_pipeline, or with --raw preprocessed tensors to mnist.
    Prints the top-k classes with their labels (Triton's classification extension).

    examples:
      python -m clients infer digits/ --top-k 3
      python -m clients infer --protocol http --raw 'digits/*.png' --json
    """
    infer.add_argument("images", nargs="+", metavar="IMAGE", help="image files, directories or glob patterns")
    infer.add_argument(
        "--raw", action="store_true", help="preprocess on the client and send tensors to the mnist model"
    )
    infer.add_argument(
        "--model", default=None, help="model name (default: mnist_pipeline, or mnist with --raw)"
    )
    infer.add_argument(
        "--top-k", type=_positive_int, default=3, metavar="K", help="classes to show per image (at most 10)"
    )
    infer.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    _sending_arguments(infer, batch_size=8, what="images")


@_subcommand("l2norm")
def _l2norm_flags(l2norm: argparse.ArgumentParser) -> None:
    """L2-normalize vectors with the l2norm model

    Send vectors (rows of a .npy array, lines of a CSV file, or stdin) to the l2norm model and print or save
    the normalized vectors.

    examples:
      python -m clients l2norm vectors.npy --output normalized.npy
      echo '3,4' | python -m clients l2norm --protocol http
    """
    l2norm.add_argument(
        "source",
        nargs="?",
        default="-",
        metavar="INPUT",
        help=".npy or CSV file; '-' reads stdin (.npy or text)",
    )
    l2norm.add_argument("--model", default="l2norm", help="model name")
    l2norm.add_argument(
        "--output", metavar="FILE", help="write the normalized vectors to FILE (.npy or .csv)"
    )
    l2norm.add_argument("--json", action="store_true", help="print the vectors as JSON instead of CSV lines")
    _sending_arguments(l2norm, batch_size=16, what="vectors")


@_subcommand("tensor")
def _tensor_flags(tensor: argparse.ArgumentParser) -> None:
    """any model: inputs from .npy/.npz (or generated), outputs printed or saved

    Send tensors to any model the server serves, described by what the server reports (names, datatypes,
    shapes with the batch dimension): inputs from a .npy file (a one-input model), an .npz file (one array per
    input name) or --input NAME=FILE.npy per input, items along the first axis; or --generate N items uniform
    in --range. Outputs are printed, as JSON with --json, or saved with --output (.npz: every output; .npy:
    the one output).

    examples:
      python -m clients tensor --model scaled_poly x.npy
      python -m clients tensor --model my_model inputs.npz --output outputs.npz
      python -m clients tensor --model my_model --input a=a.npy --input b=b.npy --json
      python -m clients tensor --model scaled_poly --generate 4 --range 0:1
    """
    tensor.add_argument(
        "data", nargs="?", metavar="DATA", help=".npy (one-input model) or .npz (per input name)"
    )
    tensor.add_argument("--model", required=True, help="model name")
    tensor.add_argument(
        "--input",
        action="append",
        type=_header_like("NAME=FILE.npy"),
        default=[],
        metavar="NAME=FILE.npy",
        help="one input from a .npy file (repeatable)",
    )
    tensor.add_argument(
        "--generate", type=_positive_int, metavar="N", help="N generated items (uniform in --range)"
    )
    tensor.add_argument(
        "--range", type=converter(value_range), default=(-1.0, 1.0), metavar="LOW:HIGH",
        help="where generated inputs lie (integers: LOW..HIGH) (default: -1:1)",
    )  # fmt: skip
    tensor.add_argument(
        "--dim", type=_positive_int, default=16, metavar="N", help="length of generated dynamic (-1) dims"
    )
    tensor.add_argument("--seed", type=_non_negative_int, default=0, metavar="N", help="of generated inputs")
    tensor.add_argument("--output", metavar="FILE", help="save the outputs (.npz, or .npy for one output)")
    tensor.add_argument("--json", action="store_true", help="print the outputs as JSON")
    _sending_arguments(tensor, batch_size=16, what="items")


@_subcommand("eval")
def _eval_flags(evaluate: argparse.ArgumentParser) -> None:
    """accuracy, confusion matrix, throughput, latency on labelled digits (the MNIST dev digits)

    Evaluate a deployment on labelled digits: the MNIST dev digits (IDX files that are not part of the
    repository: ../shared/data/mnist beside it, or --mnist-dir / $MNIST_DIR), the standard MNIST files
    (t10k-images-idx3-ubyte[.gz] ...) in --mnist-dir, any IDX pair (--images/--labels), or a folder of
    pictures with one sub-folder per label (--image-folder). Through mnist_pipeline (digits PNG-encoded,
    pictures as they are) or, with --raw, through mnist. Without data it stops with exit code 7 and says where
    it looked. The last output line is `accuracy: <fraction>`; the line before it names the digits, and says
    'held out from training' only of the shipped dev digits.

    examples:
      python -m clients eval
      python -m clients eval --split all
      python -m clients eval --mnist-dir ~/data/mnist           # t10k-images-idx3-ubyte.gz ...
      python -m clients eval --images imgs.idx3-ubyte --labels labels.idx1-ubyte
      python -m clients eval --image-folder my_digits/          # my_digits/0/*.png ... my_digits/9/
      python -m clients eval --url http://127.0.0.1:8000 --raw --min-accuracy 0.97
    """
    from clients.commands.evaluate import SPLITS

    data = evaluate.add_argument_group("data (one source at a time)")
    data.add_argument(
        "--mnist-dir",
        type=converter(cli_options.directory),
        default=None,
        metavar="DIR",
        help="folder with labelled MNIST IDX files: the dev digits (mnist-dev-*-ubyte.gz), else the standard "
        "names (t10k-images-idx3-ubyte[.gz] + t10k-labels-idx1-ubyte[.gz], else train-...) "
        f"(default: ${MNIST_DIR_ENV}, else ../{MNIST_DIR.relative_to(SHARED_DIR.parent)})",
    )
    data.add_argument(
        "--images", metavar="FILE", help="IDX images [N, 28, 28] (gzipped or not), with --labels"
    )
    data.add_argument("--labels", metavar="FILE", help="IDX labels [N] (0..9, gzipped or not), with --images")
    data.add_argument(
        "--image-folder",
        metavar="DIR",
        help="pictures (.png/.jpg/.jpeg) in one sub-folder per label: DIR/0/ ... DIR/9/",
    )
    evaluate.add_argument("--raw", action="store_true", help="send preprocessed tensors to the mnist model")
    evaluate.add_argument(
        "--model", default=None, help="model name (default: mnist_pipeline, or mnist with --raw)"
    )
    evaluate.add_argument(
        "--split",
        choices=SPLITS,
        default=None,
        help="the shipped dev digits only: the 1,000 validation digits held out from training (digit i "
        "validates when i %% 8 == 7; the default), the 7,000 it was trained on, or all 8,000. Other data is "
        "used whole; train/validation are refused there",
    )
    evaluate.add_argument(
        "--limit",
        type=_positive_int,
        default=None,
        metavar="N",
        help="use only the first N digits (of the split; a folder's pictures go by label, then file name)",
    )
    evaluate.add_argument(
        "--min-accuracy",
        type=_fraction,
        default=None,
        metavar="FRACTION",
        help="exit with code 1 when accuracy is below this",
    )
    evaluate.add_argument("--report", metavar="FILE", help="also write the figures as JSON to FILE")
    evaluate.add_argument("--no-progress", action="store_true", help="no progress bar")
    _sending_arguments(evaluate, batch_size=16, what="digits")


@_subcommand("health")
def _health_flags(health: argparse.ArgumentParser) -> None:
    """server and model readiness, metadata, config vs. what the clients expect

    Check that the server answers and is ready, and that each model is ready and has the tensors (names,
    dtypes, shapes) the clients send and read. Exit code 0 only if all is well.

    examples:
      python -m clients health
      python -m clients health --protocol http --model mnist
    """
    from clients.contracts import CONTRACTS

    health.add_argument(
        "--model",
        action="append",
        default=None,
        help=f"model to check (repeatable; default: {', '.join(CONTRACTS)})",
    )
    health.add_argument(
        "--expect",
        choices=sorted(CONTRACTS),
        default=None,
        help="interface to compare the model with (default: the one named like the model)",
    )
    health.add_argument("--json", action="store_true", help="print one JSON document instead of text")


def build_parser() -> argparse.ArgumentParser:
    common = _connection_parser()
    parser = argparse.ArgumentParser(
        prog="python -m clients",
        description=_paragraph("Clients for the trt_plugin_kit models on Triton (gRPC or HTTP)."),
        formatter_class=_HelpFormatter,
        epilog="Run `python -m clients COMMAND --help` for the flags of a command.\n"
        "Exit codes: 0 ok, 1 failed, 2 usage, 3 server unreachable, 4 model not ready/unknown, "
        "5 wrong model, 6 timeout, 7 bad input, 8 restricted API without --admin-key.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, add_flags in _COMMANDS.items():
        _add_command(commands, common, name, add_flags)
    return parser


def connection_settings(args: argparse.Namespace) -> ConnectionSettings:
    try:
        endpoint = cli_options.endpoint_from_args(args)
    except ValueError as error:
        raise errors.UsageError(str(error)) from None
    headers = dict(args.header)
    if args.admin_key:
        headers.setdefault(admin_header(endpoint.protocol), args.admin_key)
    uses_client_certs = args.root_certificates or args.private_key or args.certificate_chain or args.insecure
    if uses_client_certs and not (args.ssl or endpoint.tls):
        raise errors.UsageError("--root-certificates/--private-key/--certificate-chain/--insecure need --ssl")
    if bool(args.private_key) != bool(args.certificate_chain):
        raise errors.UsageError("--private-key and --certificate-chain go together (client authentication)")
    return ConnectionSettings.for_endpoint(
        endpoint,
        timeout_s=args.timeout,
        retries=args.retries,
        headers=headers,
        ssl=args.ssl or endpoint.tls,
        root_certificates=args.root_certificates,
        private_key=args.private_key,
        certificate_chain=args.certificate_chain,
        insecure=args.insecure,
        verbose=args.verbose,
    )


def _command(name: str):
    if name == "infer":
        from clients.commands.infer import run
    elif name == "l2norm":
        from clients.commands.l2norm import run
    elif name == "eval":
        from clients.commands.evaluate import run
    elif name == "tensor":
        from clients.commands.tensor import run
    else:
        from clients.commands.health import run
    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(join_negative_values(sys.argv[1:] if argv is None else argv))
    # Library warnings (retries, ...) go to stderr as `warning: ...`, like the command's own.
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s", stream=sys.stderr)
    try:
        settings = connection_settings(args)
        shm.ensure_available(getattr(args, "shared_memory", "none"))
        return asyncio.run(_command(args.command)(args, settings))
    except errors.ClientError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return errors.EXIT_INTERRUPTED
