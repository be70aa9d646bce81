"""options.tls: the run's material or false, nothing else; the suite writes the material."""

import ssl

import pytest
from cryptography import x509

from harness.spec import TestSpec
from harness.suites.garlicfarm import PROTOCOL, node_extra
from nodes.common.config import ConfigError
from nodes.garlicfarm import tls


def test_option_forms(tmp_path):
    assert tls.parse_option(False) is None
    m = tls.node_tls_material(tmp_path, "n1")
    files = tls.parse_option(m)
    assert files is not None and files.cert.is_file()
    for bad in (None, True, "yes", {"ca": m["ca"]}):
        with pytest.raises(ConfigError, match="options.tls"):
            tls.parse_option(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        tls.parse_option({**m, "key": str(tmp_path / "missing.key")})


def test_one_ca_per_run_and_node_certificates_name_the_node(tmp_path):
    a, b = tls.node_tls_material(tmp_path, "n1"), tls.node_tls_material(tmp_path, "n2")
    assert a["ca"] == b["ca"]
    cert = x509.load_pem_x509_certificate(open(a["cert"], "rb").read())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["n1"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ctx = tls.client_context(a["ca"])
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_suite_writes_material_unless_the_run_says_tls_false(tmp_path):
    spec = TestSpec(name="t", protocol=PROTOCOL, nodes=3)
    opts = node_extra(spec, 1, tmp_path)["options"]
    assert opts["tls"]["cert"].endswith("n2.pem") and (tmp_path / "tls" / "ca.pem").is_file()
    plain = TestSpec(name="t", protocol=PROTOCOL, nodes=3, options={"tls": False})
    assert "tls" not in node_extra(plain, 0, tmp_path / "p")["options"]
    assert not (tmp_path / "p" / "tls").exists()
    with pytest.raises(ValueError, match="options.tls"):
        node_extra(TestSpec(name="t", protocol=PROTOCOL, nodes=3, options={"tls": "off"}), 0, tmp_path)
