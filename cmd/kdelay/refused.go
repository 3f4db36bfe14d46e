package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
)

// refused says which setting to fix when a broker answered but refused the
// connection's security: the SASL credentials or mechanism, the CA, the
// client certificate, or TLS itself. It is nil for other errors. The
// messages name keys, never their values: a secret must not reach a log.
func refused(err error) error {
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		notTLS     tls.RecordHeaderError
		op         *net.OpError
		verifyFail *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("the broker rejected kdelay's SASL credentials: %w; fix sasl-password (or sasl-password-file), sasl-username or sasl-mechanism", err)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("the broker's listener does not enable this SASL mechanism: %w; set sasl-mechanism to one it does (its sasl.enabled.mechanisms), or point brokers at the listener for it", err)
	case errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("the broker's listener does not take SASL: %w; remove sasl-mechanism, or point brokers at its SASL listener", err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("the broker's TLS certificate is not signed by a CA kdelay trusts (%v); set tls-ca-file to the PEM file of the CA that signs it", err)
	case errors.As(err, &hostname):
		return fmt.Errorf("the broker's TLS certificate is not for the address dialled (%v); connect by a name it holds, or set tls-server-name to one", err)
	case errors.As(err, &verifyFail):
		return fmt.Errorf("the broker's TLS certificate did not verify (%v); check tls-ca-file and tls-server-name", err)
	case errors.As(err, &notTLS):
		return fmt.Errorf("the broker does not speak TLS on this address (%v); set tls to false, or point brokers at its TLS listener", err)
	case errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports a TLS alert from the peer as this OpError:
		// the broker ended the handshake, because it wants a client
		// certificate its CA signed (Kafka sends bad_certificate).
		return fmt.Errorf("the broker refused the TLS handshake (%v); it requires a client certificate its CA signs: set tls-cert-file and tls-key-file", err)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the broker closed the connection without an answer (%v); if its listener is TLS, set tls to true, if it needs SASL, set sasl-mechanism, and if it requires a client certificate, set tls-cert-file and tls-key-file", err)
	}
	return nil
}
