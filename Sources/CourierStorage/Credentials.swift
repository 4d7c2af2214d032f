@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

/// A user name and password for HTTP authentication (Basic, Digest or NTLM; libcurl picks the
/// strongest the server offers). Credentials live in memory only, never on disk.
public struct Credential: Sendable, Hashable {
    /// How long Courier keeps a credential it was given in a challenge.
    public enum Persistence: Sendable, Hashable {
        /// For the one request that asked.
        case none
        /// For the rest of the session (in memory).
        case forSession
    }

    /// The user name.
    public var user: String
    /// The password.
    public var password: String
    /// How long it is kept when given in answer to a challenge.
    public var persistence: Persistence
    /// Send it with Basic authentication up front, without waiting for a 401 (only for
    /// servers known to want Basic: the password goes out in every request).
    public var sendsPreemptively: Bool

    /// Creates a credential.
    public init(user: String, password: String, persistence: Persistence = .forSession, sendsPreemptively: Bool = false)
    {
        self.user = user
        self.password = password
        self.persistence = persistence
        self.sendsPreemptively = sendsPreemptively
    }
}

/// Where a credential applies: scheme, host, port and realm (RFC 9110 section 11.5).
///
/// A WebSocket's origin is its handshake's: a space made for `ws` is the `http` one, and one
/// made for `wss` the `https` one (RFC 6455 section 4.1 sends the handshake as an HTTP
/// request to that origin), so a credential stored for `ws://host:port` goes with the
/// handshake of a WebSocket to that host and port, and with an http request there.
public struct ProtectionSpace: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https` (the initializers take `ws` for `http` and `wss` for `https`).
    public var scheme: String
    /// The host, normalized: lower case, without a trailing dot, an IDNA name in its ASCII
    /// (`xn--`) form, so that every spelling of one host is one protection space.
    public var host: String
    /// The port.
    public var port: Int
    /// The realm the server named in its challenge; nil matches any realm of the origin.
    public var realm: String?
    /// Whether it is a proxy's (407) rather than the server's (401).
    public var isProxy: Bool

    /// Creates a protection space. The scheme is lower-cased, and `ws` and `wss` become
    /// `http` and `https`: a WebSocket's credentials are those of its handshake's origin.
    public init(scheme: String, host: String, port: Int, realm: String? = nil, isProxy: Bool = false) {
        self.scheme = Self.httpScheme(for: scheme)
        self.host = HostName.normalized(host)
        self.port = port
        self.realm = realm
        self.isProxy = isProxy
    }

    /// The origin of `url`, any realm: its scheme (`ws` as `http`, `wss` as `https`), host,
    /// and port (without one, the scheme's default: 80 for http and ws, 443 for https and
    /// wss).
    public init?(url: URL, realm: String? = nil) {
        guard let scheme = url.scheme?.lowercased(), let host = url.host else { return nil }
        self.init(
            scheme: scheme, host: host, port: url.port ?? HostName.defaultPort(forScheme: scheme) ?? 80, realm: realm)
    }

    /// The scheme lower-cased, with a WebSocket's written as its handshake's.
    private static func httpScheme(for scheme: String) -> String {
        switch scheme.lowercased() {
        case "ws": "http"
        case "wss": "https"
        case let other: other
        }
    }

    /// `https://host:port "realm"`.
    public var description: String {
        "\(isProxy ? "proxy " : "")\(scheme)://\(host):\(port)" + (realm.map { " \"\($0)\"" } ?? "")
    }

    package var origin: ProtectionSpace { ProtectionSpace(scheme: scheme, host: host, port: port, isProxy: isProxy) }
}

/// A 401 (or 407) the session has no credential for.
public struct AuthenticationChallenge: Sendable {
    /// Where a credential would apply.
    public var protectionSpace: ProtectionSpace
    /// The authentication schemes the server offered (`Basic`, `Digest`, `NTLM`...).
    public var schemes: [String]
    /// The response that asked.
    public var response: HTTPResponse
    /// The request's URL.
    public var url: URL

    /// A challenge (for tests of a `credential(for:)` override, say).
    public init(protectionSpace: ProtectionSpace, schemes: [String], response: HTTPResponse, url: URL) {
        self.protectionSpace = protectionSpace
        self.schemes = schemes
        self.response = response
        self.url = url
    }
}

/// The session's credentials, by protection space. In memory only, guarded by `state`.
public final class CredentialStore: Sendable {
    private let state = Locked([ProtectionSpace: Credential]())

    package init() {}

    /// Keeps `credential` for `space`.
    public func set(_ credential: Credential, for space: ProtectionSpace) {
        state.withLock { $0[space] = credential }
    }

    /// The credential for `space`: for its realm, else one for the whole origin.
    public func credential(for space: ProtectionSpace) -> Credential? {
        state.withLock { store in
            if let exact = store[space] { return exact }
            if let origin = store[space.origin] { return origin }
            if space.realm == nil {
                return store.first { $0.key.origin == space.origin }?.value
            }
            return nil
        }
    }

    /// Every space with a credential.
    public var spaces: [ProtectionSpace] { state.withLock { Array($0.keys) } }

    /// Whether there is no credential at all (requests then skip the lookup).
    package var isEmpty: Bool { state.withLock { $0.isEmpty } }

    /// Forgets the credential for `space`.
    public func remove(for space: ProtectionSpace) {
        state.withLock { $0[space] = nil }
    }

    /// Forgets every credential.
    public func removeAll() {
        state.withLock { $0.removeAll() }
    }
}

/// Parses `WWW-Authenticate` (and `Proxy-Authenticate`) values: the schemes and the first
/// realm (RFC 9110 section 11.6.1; enough for choosing a credential, libcurl does the rest).
package enum AuthenticateHeader {
    package static func parse(_ values: [String]) -> (schemes: [String], realm: String?) {
        var schemes: [String] = []
        var realm: String?
        for value in values {
            if let scheme = value.split(separator: " ", maxSplits: 1).first.map(String.init), !scheme.contains("=") {
                schemes.append(scheme)
            }
            if realm == nil, let range = value.range(of: "realm=\"", options: .caseInsensitive) {
                let rest = value[range.upperBound...]
                if let end = rest.firstIndex(of: "\"") { realm = String(rest[..<end]) }
            }
        }
        return (schemes, realm)
    }
}
