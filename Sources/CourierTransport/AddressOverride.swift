import Foundation

/// Sends requests for one host and port somewhere else, without asking DNS: curl's
/// `--resolve` and `--connect-to`. The host matches however a request spells it (case, a
/// trailing dot, an IDNA name in Unicode or `xn--` form).
public struct AddressOverride: Sendable, Hashable {
    package enum Kind: Sendable, Hashable {
        case resolve(host: String, port: Int, address: String)
        case connect(host: String, port: Int, toHost: String, toPort: Int)
    }

    package let kind: Kind

    /// Requests to `host`:`port` connect to the IP `address` (same port); TLS still checks the
    /// certificate against `host`.
    public static func resolve(_ host: String, port: Int, to address: String) -> AddressOverride {
        AddressOverride(kind: .resolve(host: host, port: port, address: address))
    }

    /// Requests to `host`:`port` connect to `otherHost`:`otherPort` instead; the request
    /// (its `Host`, the TLS name checked) still names `host`.
    public static func connect(
        _ host: String, port: Int, to otherHost: String, port otherPort: Int
    )
        -> AddressOverride
    {
        AddressOverride(kind: .connect(host: host, port: port, toHost: otherHost, toPort: otherPort))
    }

    /// Whether the override names hosts without spaces or commas (which would make
    /// libcurl read another override) and ports in 1...65535.
    public var isValid: Bool {
        let parts: [String]
        switch kind {
        case .resolve(let host, let port, let address): parts = [host, address, String(port)]
        case .connect(let host, let port, let toHost, let toPort): parts = [host, toHost, String(port), String(toPort)]
        }
        let ports: [Int]
        switch kind {
        case .resolve(_, let port, _): ports = [port]
        case .connect(_, let port, _, let toPort): ports = [port, toPort]
        }
        return parts.allSatisfy { !$0.isEmpty && !$0.contains(where: { $0.isWhitespace || $0 == "," }) }
            && ports.allSatisfy { (1...65535).contains($0) }
    }
}
