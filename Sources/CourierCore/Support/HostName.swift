import Foundation

/// Host names in the one form Courier compares them in.
///
/// The same server can be spelled many ways: `LocalHost`, `localhost.` (the fully qualified
/// form, with the root's empty label), `Bücher.example` and `xn--bcher-kva.example`. libcurl
/// connects to all of them alike, so every decision keyed by a host (certificate pins, HSTS,
/// the origin a credential was given for, cookies, whether a redirect stays on its origin,
/// address overrides) compares ``normalized(_:)`` names: otherwise a spelling that the key's
/// owner did not write would slip past the rule.
package enum HostName {
    /// `host` in lower case, without the root's trailing dot, with each label that is not
    /// ASCII in its IDNA ASCII form (`xn--` and Punycode, RFC 3492, after Unicode lower case
    /// and NFC). IPv6 addresses lose their brackets and are lower-cased; IPv4 addresses stay as
    /// they are. An empty name stays empty.
    package static func normalized(_ host: some StringProtocol) -> String {
        var name = Substring(host)
        if name.hasPrefix("["), name.hasSuffix("]"), name.count >= 2 { name = name.dropFirst().dropLast() }
        if name.count > 1, name.hasSuffix(".") { name = name.dropLast() }
        guard name.utf8.contains(where: { $0 >= 0x80 }) else { return asciiLowercased(name) }
        let folded = String(name).lowercased().precomposedStringWithCanonicalMapping
        return folded.split(separator: ".", omittingEmptySubsequences: false).map { label in
            guard label.utf8.contains(where: { $0 >= 0x80 }), let encoded = punycode(label) else {
                return String(label)
            }
            return "xn--" + encoded
        }.joined(separator: ".")
    }

    /// The port a URL of `scheme` connects to when it names none: 80 for `http` and `ws`, 443
    /// for `https` and `wss` (any case); nil for other schemes.
    package static func defaultPort(forScheme scheme: String?) -> Int? {
        switch scheme?.lowercased() {
        case "http", "ws": 80
        case "https", "wss": 443
        default: nil
        }
    }

    /// A URL's host, ``normalized(_:)``; nil when the URL has none.
    package static func of(_ url: URL?) -> String? {
        guard let host = url?.host, !host.isEmpty else { return nil }
        return normalized(host)
    }

    /// `authority` (`[user@]host[:port]`) with its host ``normalized(_:)``: the same string,
    /// after one pass over its bytes, when the host is already in that form (the usual case).
    ///
    /// The engine is handed URLs with this authority, so that libcurl too, which keys
    /// connections, cookies and address overrides by the name it is given, sees one spelling.
    package static func normalizedAuthority(_ authority: String) -> String {
        let bytes = authority.utf8
        var previous: UInt8 = 0
        var needed = false
        for byte in bytes {
            if (byte >= 0x41 && byte <= 0x5A) || byte >= 0x80 || (previous == 0x2E && byte == 0x3A) {
                needed = true
                break
            }
            previous = byte
        }
        guard needed || previous == 0x2E else { return authority }
        var rest = Substring(authority)
        var user = Substring()
        if let at = rest.lastIndex(of: "@") {
            user = rest[...at]
            rest = rest[rest.index(after: at)...]
        }
        var host = rest
        var port = Substring()
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            host = rest[...close]
            port = rest[rest.index(after: close)...]
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            port = rest[colon...]
        }
        let name = normalized(host)
        return String(user) + (host.hasPrefix("[") ? "[\(name)]" : name) + String(port)
    }

    /// `url`'s text with the host of its authority ``normalized(_:)`` (see
    /// ``normalizedAuthority(_:)``).
    package static func normalizingHost(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let start = schemeEnd.upperBound
        let end = url[start...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
        let authority = String(url[start..<end])
        let normalized = normalizedAuthority(authority)
        guard normalized != authority else { return url }
        return String(url[..<start]) + normalized + url[end...]
    }

    private static func asciiLowercased(_ text: Substring) -> String {
        guard text.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return String(text) }
        return String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    // MARK: Punycode (RFC 3492 section 6.3)

    private static let base = 36
    private static let tMin = 1
    private static let tMax = 26

    /// The Punycode of `label` (without the `xn--` prefix); nil if the label is too long to
    /// encode without overflow, which no valid host label is.
    static func punycode(_ label: some StringProtocol) -> String? {
        let points = label.unicodeScalars.map { Int($0.value) }
        var output = String(String.UnicodeScalarView(label.unicodeScalars.filter(\.isASCII)))
        let basicCount = output.unicodeScalars.count
        if basicCount > 0 { output.append("-") }
        var n = 128
        var delta = 0
        var bias = 72
        var handled = basicCount
        while handled < points.count {
            guard let next = points.filter({ $0 >= n }).min() else { break }
            let (step, overflow) = (next - n).multipliedReportingOverflow(by: handled + 1)
            guard !overflow, delta <= Int(Int32.max) - step else { return nil }
            delta += step
            n = next
            for point in points {
                if point < n { delta += 1 }
                guard point == n else { continue }
                var q = delta
                var k = base
                while true {
                    let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                    if q < t { break }
                    output.unicodeScalars.append(digit(t + (q - t) % (base - t)))
                    q = (q - t) / (base - t)
                    k += base
                }
                output.unicodeScalars.append(digit(q))
                bias = adapt(delta, count: handled + 1, first: handled == basicCount)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return output
    }

    private static func adapt(_ delta: Int, count: Int, first: Bool) -> Int {
        var delta = first ? delta / 700 : delta / 2
        delta += delta / count
        var k = 0
        while delta > ((base - tMin) * tMax) / 2 {
            delta /= base - tMin
            k += base
        }
        return k + (base - tMin + 1) * delta / (delta + 38)
    }

    private static func digit(_ value: Int) -> Unicode.Scalar {
        Unicode.Scalar(UInt8(value < 26 ? 0x61 + value : 0x30 + value - 26))
    }
}
