import CourierCore
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
    /// A PEM file of certificate revocation lists: a server certificate its issuer has revoked
    /// is refused. Only the leaf is checked, and the file must hold a current list from the
    /// leaf's issuer (a chain whose issuer has no list in it is refused too).
    public var certificateRevocationListFile: URL?
    /// Whether the server must staple a good OCSP response to its certificate (RFC 6066's
    /// status request): a connection without one, or with one saying revoked, fails. Default
    /// false, as in browsers: most servers staple only now and then.
    public var requiresOCSPStapling = false
    /// Decides the trust of each new connection's certificate chain in place of the usual
    /// check, which it sees the verdict of. Needs libcurl built with OpenSSL.
    public var serverTrustEvaluator: ServerTrustEvaluator?
    /// Another configuration for some hosts: keys are host names (`api.example.com`) or a
    /// `*.` and a domain (`*.internal.example`, any name under it, at any depth). The most
    /// specific key wins (the name itself, then the longest domain), and its configuration
    /// replaces this one wholly for that host: its own CAs, client certificate, pins and
    /// evaluator. It applies per hop: a redirect to another host uses that host's. A host's
    /// configuration has no hosts of its own.
    public var hosts: [String: TLSConfiguration] = [:]

    /// The defaults: verification on, the system's CAs, no pins, no client certificate.
    public init() {}

    /// Trust these CAs (a PEM file of them) in place of the system's; with `clientIdentity`,
    /// present that certificate. A call's own configuration is often just this.
    ///
    /// ```swift
    /// let tenant = TLSConfiguration(certificateAuthorityFile: tenantCA, clientIdentity: .pem(certificate: cert, key: key))
    /// let reply: JSON = try await api.GET("ledger", options: .init(tls: tenant))
    /// ```
    public init(certificateAuthorityFile: URL, clientIdentity: ClientIdentity? = nil) {
        self.certificateAuthorityFile = certificateAuthorityFile
        self.trustsSystemCertificates = false
        self.clientIdentity = clientIdentity
    }

    /// What is wrong with the pins and the hosts, before any request is sent.
    func validate() throws(CourierError) {
        for (pattern, configuration) in hosts {
            let name = pattern.hasPrefix("*.") ? String(pattern.dropFirst(2)) : pattern
            guard !name.isEmpty, !name.contains("*"), !name.contains(where: \.isWhitespace) else {
                throw .tls(
                    .init(message: "The TLS host '\(pattern)' is not a host name or '*.' and a domain"))
            }
            guard configuration.hosts.isEmpty else {
                throw .tls(.init(message: "The TLS configuration for '\(pattern)' has hosts of its own"))
            }
            try configuration.validate()
        }
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

    /// The configuration as the engine applies it, with `environment`'s CA file and
    /// directory left to the session.
    var policy: TLSPolicy {
        var policy = TLSPolicy()
        policy.verifies = verifiesCertificates
        policy.caFile = certificateAuthorityFile?.path
        policy.caDirectory = certificateAuthorityDirectory?.path
        policy.trustsSystemCAs = trustsSystemCertificates
        policy.minimum = minimumVersion
        policy.maximum = maximumVersion
        policy.pins = normalizedPins
        policy.clientIdentity = clientIdentity
        policy.revocationListFile = certificateRevocationListFile?.path
        policy.requiresStapledStatus = requiresOCSPStapling
        policy.evaluator = serverTrustEvaluator
        for (pattern, configuration) in hosts {
            let key =
                pattern.hasPrefix("*.")
                ? "*." + HostName.normalized(pattern.dropFirst(2)) : HostName.normalized(pattern)
            policy.hosts[key] = configuration.policy
        }
        return policy
    }

    /// The pins by normalized host (lower case, no trailing dot, IDNA names in ASCII): the
    /// form the engine looks a request's host up in. Two spellings of one host pool their pins.
    var normalizedPins: [String: [String]] {
        Dictionary(pinnedPublicKeys.map { (HostName.normalized($0.key), $0.value) }, uniquingKeysWith: +)
    }
}

extension RequestOptions {
    /// This call's TLS configuration, in place of the session's (nil: the session's): a CA or a
    /// client certificate per tenant on one session, say. It replaces the session's wholly (its
    /// pins, hosts and evaluator too), and is checked before the request is sent as the
    /// session's is. A connection opened with other trust or another client certificate is not
    /// reused for it; with a trust evaluator of its own, the call opens a connection that no
    /// other request reuses.
    public var tls: TLSConfiguration? {
        get { tlsConfiguration as? TLSConfiguration }
        set { setTLS(newValue, policy: newValue?.policy) }
    }

    /// Options that change only the call's TLS configuration (see ``tls``).
    public init(tls: TLSConfiguration) {
        self.init()
        self.tls = tls
    }
}
