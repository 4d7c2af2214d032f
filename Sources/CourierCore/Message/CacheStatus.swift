import Foundation

/// What an HTTP cache did with a response, in the terms of RFC 9211's `Cache-Status` field: a
/// response Courier's cache answered or forwarded has one (`response.cacheStatus`), and any
/// cache's entry in a `Cache-Status` field can be read with ``init(parsing:)``.
///
/// ```swift
/// let response = try await api.request(.get, "catalog", serializer: DataResponseSerializer())
/// if let status = response.cacheStatus, !status.hit { print("went to the server:", status.forward ?? "") }
/// ```
public struct CacheStatus: Sendable, Hashable, CustomStringConvertible {
    /// The cache's name: `Courier` for Courier's own.
    public var cache: String
    /// The response came from the cache without going to the server.
    public var hit: Bool
    /// Why the request went to the server (`fwd`), when it did.
    public var forward: ForwardReason?
    /// The status the server answered the forwarded request with (`fwd-status`): a 304 for a
    /// stored response revalidated.
    public var forwardStatus: Int?
    /// The response's freshness left, in seconds, when it left the cache (`ttl`): negative when
    /// it was stale.
    public var ttl: Int?
    /// The response was stored (`stored`).
    public var stored: Bool
    /// More about what happened (`detail`): `stale-while-revalidate`, `stale-if-error`.
    public var detail: String?

    /// Why a request went to the server (RFC 9211 section 2.2).
    public struct ForwardReason: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
        /// The token, as the field spells it.
        public var rawValue: String
        /// A forward reason from its token.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Nothing was stored for the URL.
        public static let uriMiss = ForwardReason(rawValue: "uri-miss")
        /// Something was stored for the URL, for other values of the fields it varies on.
        public static let varyMiss = ForwardReason(rawValue: "vary-miss")
        /// Not stored, without saying why.
        public static let miss = ForwardReason(rawValue: "miss")
        /// The request asked to go to the server (`no-cache`, or a policy that reloads).
        public static let request = ForwardReason(rawValue: "request")
        /// The stored response was stale: the request revalidated it, or replaced it.
        public static let stale = ForwardReason(rawValue: "stale")
        /// Only part of the response was stored.
        public static let partial = ForwardReason(rawValue: "partial")
        /// The token.
        public var description: String { rawValue }
    }

    /// A status; `cache` names the cache (`Courier` by default).
    public init(
        cache: String = "Courier", hit: Bool = false, forward: ForwardReason? = nil, forwardStatus: Int? = nil,
        ttl: Int? = nil, stored: Bool = false, detail: String? = nil
    ) {
        self.cache = cache
        self.hit = hit
        self.forward = forward
        self.forwardStatus = forwardStatus
        self.ttl = ttl
        self.stored = stored
        self.detail = detail
    }

    /// The entry as a member of a `Cache-Status` field:
    /// `Courier; fwd=stale; fwd-status=304; ttl=60; stored`.
    public var description: String {
        var parts = [Self.item(cache)]
        if hit { parts.append("hit") }
        if let forward { parts.append("fwd=\(forward.rawValue)") }
        if let forwardStatus { parts.append("fwd-status=\(forwardStatus)") }
        if let ttl { parts.append("ttl=\(ttl)") }
        if stored { parts.append("stored") }
        if let detail { parts.append("detail=\(Self.item(detail))") }
        return parts.joined(separator: "; ")
    }

    /// The entries of a `Cache-Status` field value, first the cache nearest the origin server
    /// (RFC 9211 section 2); members it cannot read are left out, and so are parameters it
    /// does not know.
    public static func entries(in fieldValue: String) -> [CacheStatus] {
        splitOutsideQuotes(fieldValue, on: ",").compactMap { CacheStatus(parsing: $0) }
    }

    /// One member of a `Cache-Status` field (`ExampleCache; hit; ttl=30`); nil when it has no
    /// cache name.
    public init?(parsing member: String) {
        let parts = Self.splitOutsideQuotes(member, on: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let name = parts.first.flatMap(Self.value), !name.isEmpty else { return nil }
        self.init(cache: name)
        for parameter in parts.dropFirst() where !parameter.isEmpty {
            let pair = parameter.split(separator: "=", maxSplits: 1).map(String.init)
            let key = pair[0].lowercased()
            let value = pair.count == 2 ? Self.value(pair[1]) : nil
            switch key {
            case "hit": hit = value == nil || value == "?1"
            case "stored": stored = value == nil || value == "?1"
            case "fwd": forward = value.map(ForwardReason.init(rawValue:))
            case "fwd-status": forwardStatus = value.flatMap { Int($0) }
            case "ttl": ttl = value.flatMap { Int($0) }
            case "detail": detail = value
            default: break
            }
        }
    }

    /// A token as it is, anything else as a quoted string (RFC 8941 section 3.3).
    private static func item(_ text: String) -> String {
        let token =
            text.first.map { $0.isLetter || $0 == "*" } == true
            && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "!#$%&'*+-.^_`|~:/".contains($0)) }
        if token { return text }
        return "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            + "\""
    }

    /// A bare item's text: a quoted string unquoted, anything else as it is.
    private static func value(_ text: String) -> String? {
        let text = text.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 else { return text }
        var result = ""
        var escaped = false
        for character in text.dropFirst().dropLast() {
            if escaped {
                result.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                result.append(character)
            }
        }
        return result
    }

    private static func splitOutsideQuotes(_ text: String, on separator: Character) -> [String] {
        var parts: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in text {
            if escaped {
                escaped = false
            } else if character == "\\", quoted {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if character == separator, !quoted {
                parts.append(current)
                current = ""
                continue
            }
            current.append(character)
        }
        parts.append(current)
        return parts
    }
}
