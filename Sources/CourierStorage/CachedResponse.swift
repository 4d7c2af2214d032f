@_spi(CourierInternals) import CourierCore
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

    /// The statuses a response may be stored with (RFC 9110 section 15.1, heuristically
    /// cacheable ones).
    package static let storableStatuses: Set<Int> = [200, 203, 204, 300, 301, 404, 405, 410, 414, 501]

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
        for name in CacheControl.varyNames(response.headerFields[values: .vary]) {
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
        let control = self.control
        guard !control.noCache else { return false }
        let date = response.headerFields[.date].flatMap(HTTPDate.parse) ?? responseTime
        return freshnessLifetime(control: control, date: date) > currentAge(date: date, now: now)
    }

    private func freshnessLifetime(control: CacheControl, date: Date) -> TimeInterval {
        if let lifetimeOverride { return lifetimeOverride }
        if let maxAge = control.maxAge { return maxAge }
        let fields = response.headerFields
        if let expires = fields[.expires] {
            guard let expiry = HTTPDate.parse(expires) else { return 0 }  // invalid: already expired
            return expiry.timeIntervalSince(date)
        }
        // Heuristic freshness (section 4.2.2): a tenth of the time since the last modification.
        if let lastModified = fields[.lastModified].flatMap(HTTPDate.parse),
            [200, 203, 204, 300, 301, 404, 410].contains(response.status.code)
        {
            return max(0, date.timeIntervalSince(lastModified) / 10)
        }
        return 0
    }

    /// Section 4.2.3, with `date` the response's `Date` (or its arrival).
    private func currentAge(date: Date, now: Date) -> TimeInterval {
        let ageValue = response.headerFields[.age].flatMap(TimeInterval.init) ?? 0
        let apparentAge = max(0, responseTime.timeIntervalSince(date))
        let responseDelay = responseTime.timeIntervalSince(requestTime)
        let correctedInitialAge = max(apparentAge, ageValue + responseDelay)
        return correctedInitialAge + now.timeIntervalSince(responseTime)
    }

    package var validators: (etag: String?, lastModified: String?) {
        (response.headerFields[.eTag], response.headerFields[.lastModified])
    }
}

/// The directives of `Cache-Control` that Courier acts on (RFC 9111 section 5.2).
package struct CacheControl {
    package var maxAge: TimeInterval?
    package var noStore = false
    package var noCache = false
    package var mustRevalidate = false
    package var isPublic = false

    /// Parses the values of `Cache-Control` fields. Every response of a session with a cache
    /// goes through here, so it walks the UTF-8 bytes once: directive names are ASCII tokens
    /// (RFC 9111 section 5.2), compared without building strings or grapheme clusters.
    package init(_ values: [String]) {
        for value in values {
            var value = value
            value.withUTF8 { bytes in parse(bytes) }
        }
    }

    private mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) {
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
            directive(UnsafeBufferPointer(rebasing: bytes[start..<end]))
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
        if named("max-age") {
            let value = equals.map { bytes.trimmingWhitespace(($0 + 1)..<bytes.count, also: UInt8(ascii: "\"")) }
            maxAge = Self.deltaSeconds(value.map { UnsafeBufferPointer(rebasing: bytes[$0]) })
        } else if named("no-store") {
            noStore = true
        } else if named("no-cache") {
            noCache = true
        } else if named("must-revalidate") || named("proxy-revalidate") {
            mustRevalidate = true
        } else if named("public") || named("s-maxage") {
            isPublic = true
        }
    }

    /// A delta-seconds value (RFC 9111 section 1.2.2): digits only. One too large to hold is
    /// 2^31, as the RFC says; a missing or malformed one (`-5`, `1e3`, `inf`) is 0, so that the
    /// response is stale rather than fresh for a time nobody meant.
    private static func deltaSeconds(_ digits: UnsafeBufferPointer<UInt8>?) -> TimeInterval {
        guard let digits, !digits.isEmpty else { return 0 }
        var seconds = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return 0 }
            seconds = min(seconds * 10 + Int(byte - UInt8(ascii: "0")), 1 << 31)
        }
        return TimeInterval(seconds)
    }

    /// `text` without leading and trailing spaces and tabs.
    private static func trimmed(_ text: Substring) -> Substring {
        let isTrimmed: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isTrimmed($0) }),
            let last = text.lastIndex(where: { !isTrimmed($0) })
        else { return "" }
        return text[first...last]
    }

    /// The lower-cased field names that `Vary` values list.
    package static func varyNames(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }.map { trimmed($0).lowercased() }.filter { !$0.isEmpty }
    }
}
