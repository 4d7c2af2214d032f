import CourierCore
import CourierTransport

/// libcurl's form of a session's address overrides: the `CURLOPT_RESOLVE` and
/// `CURLOPT_CONNECT_TO` lists, built once per distinct set of overrides and kept while the
/// engine lives (libcurl reads them for every transfer that uses them, so they must outlive
/// each). A session has one set; a different set per request would be a few more lists.
/// Engine thread (each engine keeps its own).
struct AddressOverrideLists {
    /// The lists for one set of overrides; nil where the set has no override of that kind.
    struct Lists {
        var resolve: HeaderList?
        var connect: HeaderList?
    }

    private var built: [[AddressOverride]: Lists] = [:]

    /// The lists for `overrides`, built on first use.
    mutating func lists(for overrides: [AddressOverride]) -> Lists {
        if let lists = built[overrides] { return lists }
        let resolve = overrides.compactMap(Self.resolveLine)
        let connect = overrides.compactMap(Self.connectLine)
        let lists = Lists(
            resolve: resolve.isEmpty ? nil : HeaderList(lines: resolve),
            connect: connect.isEmpty ? nil : HeaderList(lines: connect))
        built[overrides] = lists
        return lists
    }

    /// The `CURLOPT_RESOLVE` line of a resolve override (`host:port:address`); nil for
    /// another kind. The host is normalized, as in every URL the engine is handed.
    static func resolveLine(_ override: AddressOverride) -> String? {
        guard case .resolve(let host, let port, let address) = override.kind else { return nil }
        return "\(HostName.normalized(host)):\(port):\(bracketed(address))"
    }

    /// The `CURLOPT_CONNECT_TO` line of a connect override (`host:port:to-host:to-port`); nil
    /// for another kind.
    static func connectLine(_ override: AddressOverride) -> String? {
        guard case .connect(let host, let port, let toHost, let toPort) = override.kind else { return nil }
        return "\(HostName.normalized(host)):\(port):\(bracketed(toHost)):\(toPort)"
    }

    /// An IPv6 address goes in brackets.
    private static func bracketed(_ address: String) -> String {
        address.contains(":") && !address.hasPrefix("[") ? "[\(address)]" : address
    }
}
