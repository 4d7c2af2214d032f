import CourierCore
import Foundation
import HTTPTypes

/// A stored response, with what RFC 9111 needs to judge it: when it was requested and
/// received, the request headers its `Vary` names, and any lifetime the caller imposed.
package struct CachedResponse: Sendable {
    package var key: String
    package var response: HTTPResponse
    package var body: Data
    var requestTime: Date
    var responseTime: Date
    /// The request's values of the headers `Vary` lists (lower-case names; nil when absent).
    var varying: [String: String?]
    var lifetimeOverride: Double?

    /// The statuses that are heuristically cacheable (RFC 9110 section 15.1): a response with
    /// one of them may be stored without explicit freshness (with a validator, or
    /// `Last-Modified` for a heuristic lifetime). A response with any other final status is
    /// stored only with explicit freshness (`max-age`, `Expires`, or the caller's lifetime).
    /// `206` is never stored: Courier keeps whole responses only.
    package static let heuristicStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// The statuses whose meaning Courier knows (those RFC 9110 defines), for `must-understand`.
    package static let understoodStatuses: Set<Int> = Set(
        [200, 201, 202, 203, 204, 205, 300, 301, 302, 303, 304, 307, 308, 421, 422, 426]
            + Array(400...417) + Array(500...505))

    /// Fields that describe a connection, not the response (RFC 9110 section 7.6.1) and the
    /// proxy-only ones: never stored, nor taken from a `304` (RFC 9111 section 3.1).
    package static let hopByHopFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "proxy-authenticate",
        "proxy-authentication-info", "proxy-authorization",
    ]

    /// `response` as the cache keeps it: without hop-by-hop fields, the fields `Connection`
    /// names, and the fields `no-cache="..."` or `private="..."` name.
    package static func storedHead(of response: HTTPResponse, control: CacheControl) -> HTTPResponse {
        let omitted = hopByHopFields.union(control.omittedFields)
            .union(FieldList.lowercasedItems(response.headerFields[values: .connection]))
        guard response.headerFields.contains(where: { omitted.contains($0.name.canonicalName) }) else {
            return response
        }
        var stored = response
        stored.headerFields = HTTPFields(response.headerFields.filter { !omitted.contains($0.name.canonicalName) })
        return stored
    }

    package init(
        key: String, response: HTTPResponse, body: Data, request: HTTPRequest, requestTime: Date, responseTime: Date,
        lifetimeOverride: Duration?
    ) {
        self.key = key
        self.response = response
        self.body = body
        self.requestTime = requestTime
        self.responseTime = responseTime
        varying = [:]
        for name in FieldList.lowercasedItems(response.headerFields[values: .vary]) {
            varying[name] = HTTPField.Name(name).flatMap { request.headerFields[$0] }
        }
        self.lifetimeOverride = lifetimeOverride.map {
            Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18
        }
    }

    // MARK: Stored form

    /// What a cache file holds before the body: JSON, with the header fields as
    /// `[name, value]` pairs in order.
    struct Record: Codable {
        var key: String
        var status: Int
        var reason: String
        var headers: [[String]]
        var requestTime: Date
        var responseTime: Date
        var varying: [String: String?]
        var lifetimeOverride: Double?
        /// The body's length, so that a file cut short (files are not synced to disk, and a
        /// power loss can truncate one) reads as corrupt, never as a shorter body. Absent in
        /// files written before it existed.
        var bodyLength: Int?
    }

    var record: Record {
        Record(
            key: key, status: response.status.code, reason: response.status.reasonPhrase,
            headers: response.headerFields.map { [$0.name.rawName, $0.value] }, requestTime: requestTime,
            responseTime: responseTime, varying: varying, lifetimeOverride: lifetimeOverride, bodyLength: body.count)
    }

    init(record: Record, body: Data) {
        var fields = HTTPFields()
        for pair in record.headers where pair.count == 2 {
            if let name = HTTPField.Name(pair[0]) { fields.append(HTTPField(name: name, value: pair[1])) }
        }
        key = record.key
        response = HTTPResponse(status: .init(code: record.status, reasonPhrase: record.reason), headerFields: fields)
        self.body = body
        requestTime = record.requestTime
        responseTime = record.responseTime
        varying = record.varying
        lifetimeOverride = record.lifetimeOverride
    }

    /// Approximately the bytes the entry takes: its body and header fields.
    var size: Int64 {
        Int64(
            body.count + 512 + response.headerFields.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count }
        )
    }

    /// Whether `request` sends the same values for the `Vary` headers (RFC 9111 section 4.1).
    package func matchesVary(_ request: HTTPRequest) -> Bool {
        varying.allSatisfy { name, value in
            HTTPField.Name(name).flatMap { request.headerFields[$0] } == value
        }
    }

    /// The 304's header fields replace the stored ones of the same name (RFC 9111 section 3.2).
    package mutating func update(with notModified: HTTPResponse, requestTime: Date, responseTime: Date) {
        let notModified = Self.storedHead(
            of: notModified, control: CacheControl(notModified.headerFields[values: .cacheControl]))
        for name in Set(notModified.headerFields.map(\.name)) where name != .contentLength {
            response.headerFields[values: name] = notModified.headerFields[values: name]
        }
        self.requestTime = requestTime
        self.responseTime = responseTime
    }

    // MARK: Freshness (RFC 9111 section 4.2)

    package var control: CacheControl { CacheControl(response.headerFields[values: .cacheControl]) }

    /// Usable without contacting the server at `now`.
    package func isFresh(now: Date = Date()) -> Bool {
        isUsable(for: nil, now: now)
    }

    /// Usable without contacting the server at `now` for a request with the `Cache-Control`
    /// directives `request` (RFC 9111 sections 4.2 and 5.2.1): `max-age`, `min-fresh` and
    /// `max-stale` of the request move the line; `no-cache` of the response always validates,
    /// and `must-revalidate` refuses any staleness.
    package func isUsable(for request: CacheControl?, now: Date = Date()) -> Bool {
        let control = self.control
        guard !control.noCache else { return false }
        let (lifetime, age) = freshness(control: control, now: now)
        if let request {
            if let maxAge = request.maxAge, maxAge == 0 || age > maxAge { return false }
            if let minFresh = request.minFresh, lifetime - age < minFresh { return false }
            if lifetime <= age, let maxStale = request.maxStale, !control.mustRevalidate {
                return age - lifetime <= maxStale
            }
        }
        return lifetime > age
    }

    /// How many seconds past its freshness lifetime the response is at `now` (negative while
    /// it is fresh).
    package func staleness(now: Date = Date()) -> TimeInterval {
        let (lifetime, age) = freshness(control: control, now: now)
        return age - lifetime
    }

    /// The response's age at `now` (RFC 9111 section 4.2.3): what a response served from the
    /// cache carries in `Age`.
    package func currentAge(now: Date = Date()) -> TimeInterval {
        freshness(control: control, now: now).age
    }

    private func freshness(control: CacheControl, now: Date) -> (lifetime: TimeInterval, age: TimeInterval) {
        let date = response.headerFields[.date].flatMap(HTTPDate.parse) ?? responseTime
        return (freshnessLifetime(control: control, date: date), currentAge(date: date, now: now))
    }

    private func freshnessLifetime(control: CacheControl, date: Date) -> TimeInterval {
        if let lifetimeOverride { return lifetimeOverride }
        if let maxAge = control.maxAge { return maxAge }
        let fields = response.headerFields
        let expires = fields[values: .expires]
        if !expires.isEmpty {
            // Section 5.3: an invalid date (and so two different ones) means already expired.
            guard expires.count == 1, let expiry = HTTPDate.parseStrict(expires[0]) else { return 0 }
            return expiry.timeIntervalSince(date)
        }
        // Heuristic freshness (section 4.2.2): a tenth of the time since the last modification.
        if let lastModified = fields[.lastModified].flatMap(HTTPDate.parse),
            Self.heuristicStatuses.contains(response.status.code)
        {
            return max(0, date.timeIntervalSince(lastModified) / 10)
        }
        return 0
    }

    /// Section 4.2.3, with `date` the response's `Date` (or its arrival).
    private func currentAge(date: Date, now: Date) -> TimeInterval {
        let ageValue = Self.ageValue(response.headerFields[values: .age])
        let apparentAge = max(0, responseTime.timeIntervalSince(date))
        let responseDelay = responseTime.timeIntervalSince(requestTime)
        let correctedInitialAge = max(apparentAge, ageValue + responseDelay)
        return correctedInitialAge + now.timeIntervalSince(responseTime)
    }

    /// The `Age` a response arrived with (section 5.1): the first value of the first field, as
    /// delta-seconds (digits only, parameters after `;` ignored; too large is 2^31). A value
    /// that is not a number (`abc`, `-7200`, `7200.0`) is ignored, as if absent.
    package static func ageValue(_ values: [String]) -> TimeInterval {
        guard let first = values.first?.split(separator: ",", omittingEmptySubsequences: false).first else { return 0 }
        var number = first.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces)
        return number.withUTF8 { CacheControl.deltaSeconds($0) }
    }

    package var validators: (etag: String?, lastModified: String?) {
        (response.headerFields[.eTag], response.headerFields[.lastModified])
    }
}

/// The directives of `Cache-Control` that Courier acts on (RFC 9111 section 5.2, RFC 5861).
package struct CacheControl {
    package var maxAge: TimeInterval?
    package var noStore = false
    /// `no-cache` without field names: the whole response must be validated before each use.
    package var noCache = false
    /// The field names of `no-cache="..."` and `private="..."`: the response may be stored and
    /// reused, but without these fields (RFC 9111 sections 5.2.2.4 and 5.2.2.7).
    package var omittedFields: [String] = []
    package var mustRevalidate = false
    package var isPublic = false
    /// `must-understand`: a cache that understands the status may store the response despite
    /// `no-store` (RFC 9111 section 5.2.2.3).
    package var mustUnderstand = false
    /// `stale-while-revalidate`: how long past its freshness the response may still be served
    /// while it is revalidated in the background (RFC 5861 section 3).
    package var staleWhileRevalidate: TimeInterval?
    /// `stale-if-error`: how long past its freshness the response may be served when a load
    /// fails (RFC 5861 section 4).
    package var staleIfError: TimeInterval?
    /// Request directives (RFC 9111 section 5.2.1): `max-stale` (with no value: any staleness)
    /// and `min-fresh`.
    package var maxStale: TimeInterval?
    package var minFresh: TimeInterval?

    /// Parses the values of `Cache-Control` fields. Every response of a session with a cache
    /// goes through here, so it walks the UTF-8 bytes once: directive names are ASCII tokens
    /// (RFC 9111 section 5.2), compared without building strings or grapheme clusters.
    package init(_ values: [String]) {
        for value in values {
            var value = value
            value.withUTF8 { bytes in parse(bytes) }
        }
    }

    /// No directives; `add(_:)` parses values into it.
    package init() {}

    /// Parses one `Cache-Control` value, given as its UTF-8 bytes, into these directives.
    package mutating func add(_ value: UnsafeBufferPointer<UInt8>) {
        parse(value)
    }

    /// Splits at commas outside quoted strings (`no-cache="a, b"` is one directive).
    private mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) {
        var start = 0
        while start < bytes.count {
            var end = start
            var quoted = false
            while end < bytes.count {
                let byte = bytes[end]
                if quoted {
                    if byte == UInt8(ascii: "\\") {
                        end += 1  // a quoted pair: the next byte is literal
                    } else if byte == UInt8(ascii: "\"") {
                        quoted = false
                    }
                } else if byte == UInt8(ascii: "\"") {
                    quoted = true
                } else if byte == UInt8(ascii: ",") {
                    break
                }
                end += 1
            }
            directive(UnsafeBufferPointer(rebasing: bytes[start..<min(end, bytes.count)]))
            start = end + 1
        }
    }

    /// One `name` or `name=value` directive.
    private mutating func directive(_ bytes: UnsafeBufferPointer<UInt8>) {
        let equals = bytes.firstIndex(of: UInt8(ascii: "="))
        let name = UnsafeBufferPointer(rebasing: bytes[bytes.trimmingWhitespace(0..<(equals ?? bytes.count))])
        func named(_ text: StaticString) -> Bool {
            guard name.count == text.utf8CodeUnitCount else { return false }
            let expected = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
            // ASCII case folding of A-Z only; the expected names are lower-case.
            return zip(name, expected).allSatisfy { byte, lower in
                (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == lower
            }
        }
        let value = equals.map { bytes.trimmingWhitespace(($0 + 1)..<bytes.count, also: UInt8(ascii: "\"")) }
        let valueBytes = value.map { UnsafeBufferPointer(rebasing: bytes[$0]) }
        if named("max-age") {
            // The first of several (a duplicate cannot make a response fresher).
            if maxAge == nil { maxAge = Self.deltaSeconds(valueBytes) }
        } else if named("no-store") {
            noStore = true
        } else if named("no-cache") || named("private") {
            if let valueBytes, !valueBytes.isEmpty {
                omittedFields += FieldList.lowercasedItems([String(decoding: valueBytes, as: UTF8.self)])
            } else if named("no-cache") {
                noCache = true
            }
        } else if named("must-revalidate") || named("proxy-revalidate") {
            mustRevalidate = true
        } else if named("public") || named("s-maxage") {
            isPublic = true
        } else if named("must-understand") {
            mustUnderstand = true
        } else if named("stale-while-revalidate") {
            staleWhileRevalidate = Self.deltaSeconds(valueBytes)
        } else if named("stale-if-error") {
            staleIfError = Self.deltaSeconds(valueBytes)
        } else if named("max-stale") {
            maxStale = valueBytes.map { Self.deltaSeconds($0) } ?? .infinity
        } else if named("min-fresh") {
            minFresh = Self.deltaSeconds(valueBytes)
        }
    }

    /// A delta-seconds value (RFC 9111 section 1.2.2): digits only. One too large to hold is
    /// 2^31, as the RFC says; a missing or malformed one (`-5`, `1e3`, `inf`) is 0, so that the
    /// response is stale rather than fresh for a time nobody meant.
    fileprivate static func deltaSeconds(_ digits: UnsafeBufferPointer<UInt8>?) -> TimeInterval {
        guard let digits, !digits.isEmpty else { return 0 }
        var seconds = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return 0 }
            seconds = min(seconds * 10 + Int(byte - UInt8(ascii: "0")), 1 << 31)
        }
        return TimeInterval(seconds)
    }
}
