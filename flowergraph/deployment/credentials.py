"""Credentials for a deployment: a CA, the SuperLink's server certificate, and one ECDSA P-384 key pair per
SuperNode. ``cryptography`` is a dependency of flwr itself, so nothing new is installed; the equivalent openssl /
ssh-keygen commands are in docs/deployment.md."""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path
from typing import Sequence

from ..errors import ConfigError, KeyFileError

DEFAULT_CERT_HOSTS = ("127.0.0.1", "localhost")
CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY = "ca.crt", "ca.key", "server.pem", "server.key"


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _refuse_overwrite(paths: Sequence[Path], force: bool) -> None:
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise ConfigError(
            f"refusing to overwrite existing {', '.join(existing)}; pass force=True (--force) or choose another folder"
        )


def _san_entries(hosts: Sequence[str]):
    from cryptography import x509

    if not hosts:
        raise ConfigError(
            "the server certificate needs at least one host (IP address or DNS name) for "
            "subjectAltName, e.g. 127.0.0.1 or superlink.example.org"
        )
    entries = []
    for host in hosts:
        host = str(host).strip()
        if not host or any(c.isspace() for c in host) or "/" in host or (":" in host and not _is_ip(host)):
            raise ConfigError(f"certificate host {host!r} is neither an IP address nor a DNS name")
        entries.append(x509.IPAddress(ipaddress.ip_address(host)) if _is_ip(host) else x509.DNSName(host))
    return entries


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def make_certificates(
    out_dir: str | os.PathLike, hosts: Sequence[str] = DEFAULT_CERT_HOSTS, *, days: int = 365, force: bool = False
) -> dict[str, Path]:
    """Create a CA and a SuperLink server certificate signed by it (ECDSA P-384, SHA-384).

    The server certificate's subjectAltName lists every entry of ``hosts`` (IP addresses as ``IP:``, names as
    ``DNS:``): SuperNodes and ``flwr`` check the address they connect to against it. Writes ``ca.crt`` (give it
    to every party), ``ca.key`` (keep it offline), ``server.pem`` and ``server.key`` (the SuperLink's).
    Returns the four paths by name (``ca_cert``, ``ca_key``, ``server_cert``, ``server_key``).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ConfigError(f"certificate validity days must be an integer >= 1, got {days!r}")
    hosts = list(hosts)
    san = _san_entries(hosts)
    out = Path(out_dir)
    paths = {
        "ca_cert": out / CA_CERT,
        "ca_key": out / CA_KEY,
        "server_cert": out / SERVER_CERT,
        "server_key": out / SERVER_KEY,
    }
    _refuse_overwrite(list(paths.values()), force)
    out.mkdir(parents=True, exist_ok=True)

    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)  # tolerate clock skew
    until = now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "flowergraph"),
            x509.NameAttribute(NameOID.COMMON_NAME, "flowergraph deployment CA"),
        ]
    )
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA384())
    )
    server_key = ec.generate_private_key(ec.SECP384R1())
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(san), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA384())
    )
    pem, pkcs8, none = (serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    paths["ca_cert"].write_bytes(ca_cert.public_bytes(pem))
    _write_private(paths["ca_key"], ca_key.private_bytes(pem, pkcs8, none))
    paths["server_cert"].write_bytes(server_cert.public_bytes(pem))
    _write_private(paths["server_key"], server_key.private_bytes(pem, pkcs8, none))
    return paths


def make_node_key(path: str | os.PathLike, *, force: bool = False) -> tuple[Path, Path]:
    """An ECDSA P-384 key pair in OpenSSH format: ``path`` (private, mode 600) and ``path.pub``.

    The same files as ``ssh-keygen -t ecdsa -b 384 -N "" -f path``. The private key never leaves the data
    owner; the ``.pub`` file goes to the SuperLink operator, who registers it.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = Path(path)
    public = private.with_name(private.name + ".pub")
    _refuse_overwrite([private, public], force)
    key = ec.generate_private_key(ec.SECP384R1())
    _write_private(
        private,
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        ),
    )
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) + b"\n"
    )
    return private, public


def check_private_key(path: str | os.PathLike) -> Path:
    """The path of a SuperNode private key Flower will accept (OpenSSH, unencrypted EC), else KeyFileError."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    p = Path(path).expanduser()
    if not p.is_file():
        raise KeyFileError(
            f"SuperNode private key {str(p)!r} does not exist; create one with "
            f"`python -m flowergraph.deployment keys --out DIR --name NAME` or "
            f'`ssh-keygen -t ecdsa -b 384 -N "" -f NAME`'
        )
    try:
        key = load_ssh_private_key(p.read_bytes(), None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(
            f"SuperNode private key {str(p)!r} is not an unencrypted OpenSSH private key "
            f"({exc}); Flower needs an ECDSA key, e.g. ssh-keygen -t ecdsa -b 384"
        ) from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise KeyFileError(
            f"SuperNode private key {str(p)!r} is a {type(key).__name__}; Flower needs an ECDSA "
            f"key on a NIST curve (secp256r1, secp384r1, secp521r1)"
        )
    return p


def check_public_key(path: str | os.PathLike) -> Path:
    """The path of a SuperNode public key (OpenSSH, ECDSA), else KeyFileError."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    p = Path(path).expanduser()
    if not p.is_file():
        raise KeyFileError(f"SuperNode public key {str(p)!r} does not exist")
    try:
        key = load_ssh_public_key(p.read_bytes())
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"SuperNode public key {str(p)!r} is not an OpenSSH public key ({exc})") from exc
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise KeyFileError(f"SuperNode public key {str(p)!r} is a {type(key).__name__}; Flower needs ECDSA")
    return p


def check_certificate(path: str | os.PathLike, what: str = "CA certificate") -> Path:
    from cryptography import x509

    p = Path(path).expanduser()
    if not p.is_file():
        raise KeyFileError(f"{what} {str(p)!r} does not exist")
    try:
        x509.load_pem_x509_certificate(p.read_bytes())
    except ValueError as exc:
        raise KeyFileError(f"{what} {str(p)!r} is not a PEM certificate ({exc})") from exc
    return p
