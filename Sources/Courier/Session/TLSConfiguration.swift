@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation

/// How a session's TLS connections are checked, and what the client presents.
///
/// ```swift
/// var configuration = HTTPSessionConfiguration.default
/// configuration.tls.minimumVersion = .v1_3
/// configuration.tls.pinnedPublicKeys["api.example.com"] = [
///     "sha256//r8udi/Mxd6pLOS73ZeBtMQvH+wwIjhF2uVoqrkoBSQs=",   // the key in use
///     "sha256//YLh1dUR9y6Kja30RrAn7JKnbQG/uEtLMkBgFF2Fuihg=",   // the next one
/// ]
/// ```
public struct TLSConfiguration: Sendable, Hashable {
    /// Whether the server's certificate chain and host name are verified. Default true.
    /// Turning it off lets anyone on the path read and change the traffic: the manager logs a
    /// warning when it is made.
    public var verifiesCertificates = true
    /// A PEM file of CA certificates to trust.
    public var certificateAuthorityFile: URL?
    /// A directory of CA certificates to trust, hashed as OpenSSL wants (`openssl rehash`).
    public var certificateAuthorityDirectory: URL?
    /// Whether the system's CAs stay trusted beside ``certificateAuthorityFile`` and
    /// ``certificateAuthorityDirectory``. Default true. With both a file and a directory given,
    /// those two are what is trusted.
    public var trustsSystemCertificates = true
    /// The oldest TLS version accepted; nil: OpenSSL's default (TLS 1.2 on this system).
    public var minimumVersion: TLSVersion?
    /// The newest TLS version offered; nil: the newest there is.
    public var maximumVersion: TLSVersion?
    /// Public-key pins by host name: a connection to a host with pins succeeds only if the
    /// server's key matches one of them (several let keys rotate). Each pin is
    /// `sha256//` and the base64 SHA-256 of the key's DER SubjectPublicKeyInfo, as curl's
    /// `--pinnedpubkey` takes it. Hosts without pins are verified as usual. The check happens
    /// after the handshake and before any byte of the request is sent. Host names match
    /// however they are spelled: case, a trailing dot and IDNA names in Unicode or in their
    /// `xn--` form are all one host.
    public var pinnedPublicKeys: [String: [String]] = [:]
    /// The certificate presented when a server asks for one (mutual TLS).
    public var clientIdentity: ClientIdentity?

    /// The defaults: verification on, the system's CAs, no pins, no client certificate.
    public init() {}

    /// Checks the pins; what is wrong, before any request is sent.
    func validate() throws(CourierError) {
        for (host, pins) in pinnedPublicKeys {
            guard !host.isEmpty, !pins.isEmpty else {
                throw .tls(.init(message: "A pinned host needs a name and at least one pin ('\(host)': \(pins))"))
            }
            for pin in pins {
                guard pin.hasPrefix("sha256//"), let digest = Data(base64Encoded: String(pin.dropFirst(8))),
                    digest.count == 32
                else {
                    throw .tls(
                        .init(
                            message:
                                "The pin '\(pin)' for \(host) is not sha256// followed by the base64 of a SHA-256 digest"
                        ))
                }
            }
        }
    }

    /// The pins by normalized host (lower case, no trailing dot, IDNA names in ASCII): the
    /// form the engine looks a request's host up in. Two spellings of one host pool their pins.
    var normalizedPins: [String: [String]] {
        Dictionary(pinnedPublicKeys.map { (HostName.normalized($0.key), $0.value) }, uniquingKeysWith: +)
    }
}
