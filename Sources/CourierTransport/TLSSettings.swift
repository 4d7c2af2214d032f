import CourierCore
import Foundation

/// A TLS protocol version.
///
/// Minor releases may add cases: a `switch` over it ends with `default`.
public enum TLSVersion: Int, Sendable, Hashable, Comparable, CustomStringConvertible {
    /// TLS 1.0 (RFC 2246). OpenSSL 3 refuses it at its default security level.
    case v1_0 = 10
    /// TLS 1.1 (RFC 4346). OpenSSL 3 refuses it at its default security level.
    case v1_1 = 11
    /// TLS 1.2 (RFC 5246).
    case v1_2 = 12
    /// TLS 1.3 (RFC 8446).
    case v1_3 = 13

    /// Orders versions from oldest to newest.
    public static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `TLS 1.2`.
    public var description: String { "TLS 1.\(rawValue - 10)" }
}

/// The certificate and private key a client presents when the server asks for one (mutual
/// TLS).
public struct ClientIdentity: Sendable, Hashable {
    enum Source: Sendable, Hashable {
        case pem(certificate: URL, key: URL, password: String?)
        case pkcs12(URL, password: String?)
    }

    let source: Source

    /// A PEM certificate (with any intermediates after it) and its PEM private key, encrypted
    /// with `password` or not.
    public static func pem(certificate: URL, key: URL, password: String? = nil) -> ClientIdentity {
        ClientIdentity(source: .pem(certificate: certificate, key: key, password: password))
    }

    /// A PKCS#12 (`.p12`, `.pfx`) bundle of certificate and key, with its password.
    public static func pkcs12(_ file: URL, password: String?) -> ClientIdentity {
        ClientIdentity(source: .pkcs12(file, password: password))
    }

    /// The certificate file (PEM or PKCS#12).
    package var certificatePath: String {
        switch source {
        case .pem(let certificate, _, _): certificate.path
        case .pkcs12(let file, _): file.path
        }
    }

    /// The private key file; nil for PKCS#12, which holds its key.
    package var keyPath: String? {
        if case .pem(_, let key, _) = source { return key.path }
        return nil
    }

    /// The password of the key (PEM) or of the bundle (PKCS#12).
    package var password: String? {
        switch source {
        case .pem(_, _, let password): password
        case .pkcs12(_, let password): password
        }
    }

    /// Whether the certificate is PKCS#12.
    package var isPKCS12: Bool {
        if case .pkcs12 = source { return true }
        return false
    }
}
