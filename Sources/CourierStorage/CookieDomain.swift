import CCourierSystem
import CourierCore

/// Which domains a cookie may be stored for. Cookies from responses are checked by libcurl
/// against the public suffix list; cookies handed to the `CookieStore` are checked here by the
/// same list (libpsl, the library libcurl uses), so that neither path stores a cookie for
/// `com`, `co.uk` or a part of an IP address.
package enum CookieDomain {
    /// Whether a response from `host` may set a cookie for `domain` and its subdomains (a
    /// `Domain` attribute): `domain` is `host` or a parent of it, and not a public suffix
    /// unless it is `host` itself. An IP address sets cookies for itself only.
    package static func host(_ host: String, maySetCookiesFor domain: String) -> Bool {
        let host = HostName.normalized(host)
        let domain = HostName.normalized(domain)
        if isIPAddress(host) { return domain == host }
        guard host == domain || host.hasSuffix("." + domain) else { return false }
        switch courier_cookie_domain_acceptable(host, domain) {
        case 1: return true
        case 0: return false
        default: return host == domain || hasInteriorDot(domain)
        }
    }

    /// Whether a cookie for `domain` and its subdomains may be stored with no host to check it
    /// against (`CookieStore.set(_:)`): `domain` is not a public suffix and not part of an IP
    /// address.
    package static func mayHoldCookiesForSubdomains(_ domain: String) -> Bool {
        let domain = domain.lowercased()
        guard !domain.isEmpty, !isIPAddress(domain) else { return false }
        switch courier_is_public_suffix(domain) {
        case 1: return false
        case 0: return true
        default: return hasInteriorDot(domain)
        }
    }

    /// An IPv4 address in dotted form (also a truncated one such as `0.0.1`, which a host
    /// could be asked to set cookies for), or an IPv6 address.
    static func isIPAddress(_ host: String) -> Bool {
        if host.contains(":") { return true }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        return !labels.isEmpty && labels.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCIIDigit) }
    }

    /// Without the public suffix list: what libcurl requires then, a dot between two labels.
    private static func hasInteriorDot(_ domain: String) -> Bool {
        guard let dot = domain.firstIndex(of: ".") else { return false }
        return dot != domain.startIndex && domain.index(after: dot) != domain.endIndex
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
