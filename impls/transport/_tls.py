"""Certificates for mutual TLS, generated per run with ``cryptography`` (never stored, never reused).

A ``Pki`` is one CA with a server certificate for ``localhost``/``127.0.0.1`` and client
certificates whose subject common name is the principal (``orchestrator``, ``p0``, ...). A
``stranger`` certificate from another CA with a trusted-looking name is what a wrong-CA client
presents. Keys are EC P-256 (fast to make, which matters when every run makes its own).
"""

from __future__ import annotations

import datetime

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@attrs.frozen
class Identity:
    """PEM key and certificate of one party."""

    key: bytes = attrs.field(repr=False)
    cert: bytes


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@attrs.frozen
class Authority:
    name: str
    key: ec.EllipticCurvePrivateKey = attrs.field(repr=False)
    cert: x509.Certificate

    @classmethod
    def create(cls, name: str) -> Authority:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(name, key, cert)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, *, server: bool) -> Identity:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            import ipaddress

            names: list[x509.GeneralName] = [
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            ]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Identity(_pem_key(key), cert.public_bytes(serialization.Encoding.PEM))


@attrs.frozen
class Pki:
    ca: Authority
    server: Identity
    clients: dict[str, Identity]
    stranger: Identity  # issued by another CA, under a name this CA also issued

    @classmethod
    def create(cls, principals: tuple[str, ...]) -> Pki:
        ca = Authority.create("ratchet-run-ca")
        other = Authority.create("ratchet-other-ca")
        clients = {p: ca.issue(p, server=False) for p in principals}
        return cls(ca, ca.issue("localhost", server=True), clients, other.issue(principals[0], server=False))
