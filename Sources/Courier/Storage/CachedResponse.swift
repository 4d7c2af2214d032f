import Foundation
import HTTPTypes

/// A stored response, with what RFC 9111 needs to judge it: when it was requested and
/// received, the request headers its `Vary` names, and any lifetime the caller imposed.
struct CachedResponse: Codable, Sendable {
    var key: String
    var status: Int
    var reason: String
    var headers: [[String]]  // [name, value] pairs, in order
    var body: Data
    var requestTime: Date
    var responseTime: Date

    /// The statuses a response may be stored with (RFC 9110 section 15.1, heuristically
    /// cacheable ones).
    static let storableStatuses: Set<Int> = [200, 203, 204, 300, 301, 404, 405, 410, 414, 501]
    /// The request's values of the headers `Vary` lists (lower-case names; nil when absent).
    var varying: [String: String?]
    var lifetimeOverride: Double?

    init(
        key: String, response: HTTPResponse, body: Data, request: HTTPRequest, requestTime: Date, responseTime: Date,
        lifetimeOverride: Duration?
    ) {
        self.key = key
        status = response.status.code
        reason = response.status.reasonPhrase
        headers = response.headerFields.map { [$0.name.rawName, $0.value] }
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

    var response: HTTPResponse {
        var fields = HTTPFields()
        for pair in headers where pair.count == 2 {
            if let name = HTTPField.Name(pair[0]) { fields.append(HTTPField(name: name, value: pair[1])) }
        }
        return HTTPResponse(status: .init(code: status, reasonPhrase: reason), headerFields: fields)
    }

    /// Whether `request` sends the same values for the `Vary` headers (RFC 9111 section 4.1).
    func matchesVary(_ request: HTTPRequest) -> Bool {
        varying.allSatisfy { name, value in
            HTTPField.Name(name).flatMap { request.headerFields[$0] } == value
        }
    }

    /// The 304's header fields replace the stored ones of the same name (RFC 9111 section 3.2).
    mutating func update(with notModified: HTTPResponse, requestTime: Date, responseTime: Date) {
        var fields = response.headerFields
        for name in Set(notModified.headerFields.map(\.name)) where name != .contentLength {
            fields[values: name] = notModified.headerFields[values: name]
        }
        headers = fields.map { [$0.name.rawName, $0.value] }
        self.requestTime = requestTime
        self.responseTime = responseTime
    }

    // MARK: Freshness (RFC 9111 section 4.2)

    var control: CacheControl { CacheControl(response.headerFields[values: .cacheControl]) }

    var freshnessLifetime: TimeInterval {
        if let lifetimeOverride { return lifetimeOverride }
        let fields = response.headerFields
        if let maxAge = control.maxAge { return maxAge }
        let date = fields[.date].flatMap(HTTPDate.parse) ?? responseTime
        if let expires = fields[.expires] {
            guard let expiry = HTTPDate.parse(expires) else { return 0 }  // invalid: already expired
            return expiry.timeIntervalSince(date)
        }
        // Heuristic freshness (section 4.2.2): a tenth of the time since the last modification.
        if let lastModified = fields[.lastModified].flatMap(HTTPDate.parse),
            [200, 203, 204, 300, 301, 404, 410].contains(status)
        {
            return max(0, date.timeIntervalSince(lastModified) / 10)
        }
        return 0
    }

    func currentAge(now: Date = Date()) -> TimeInterval {
        let fields = response.headerFields
        let dateValue = fields[.date].flatMap(HTTPDate.parse) ?? responseTime
        let ageValue = fields[.age].flatMap(TimeInterval.init) ?? 0
        let apparentAge = max(0, responseTime.timeIntervalSince(dateValue))
        let responseDelay = responseTime.timeIntervalSince(requestTime)
        let correctedInitialAge = max(apparentAge, ageValue + responseDelay)
        return correctedInitialAge + now.timeIntervalSince(responseTime)
    }

    /// Usable without contacting the server.
    var isFresh: Bool {
        !control.noCache && freshnessLifetime > currentAge()
    }

    var validators: (etag: String?, lastModified: String?) {
        let fields = response.headerFields
        return (fields[.eTag], fields[.lastModified])
    }
}

/// The directives of `Cache-Control` that Courier acts on (RFC 9111 section 5.2).
struct CacheControl {
    var maxAge: TimeInterval?
    var noStore = false
    var noCache = false
    var mustRevalidate = false
    var isPublic = false

    /// Parses the values of `Cache-Control` fields. Every response of a session with a cache
    /// goes through here, so it walks the text by index, without intermediate arrays or
    /// Foundation's trimming.
    init(_ values: [String]) {
        for value in values {
            var rest = value[...]
            while !rest.isEmpty {
                let comma = rest.firstIndex(of: ",") ?? rest.endIndex
                let directive = rest[..<comma]
                rest = comma < rest.endIndex ? rest[rest.index(after: comma)...] : ""
                let equals = directive.firstIndex(of: "=")
                let name = Self.trimmed(directive[..<(equals ?? directive.endIndex)])
                switch name.lowercased() {
                case "max-age":
                    maxAge = equals.flatMap {
                        TimeInterval(Self.trimmed(directive[directive.index(after: $0)...], also: "\""))
                    }
                case "no-store": noStore = true
                case "no-cache": noCache = true
                case "must-revalidate", "proxy-revalidate": mustRevalidate = true
                case "public", "s-maxage": isPublic = true
                default: break
                }
            }
        }
    }

    /// `text` without leading and trailing spaces, tabs (and `extra`).
    private static func trimmed(_ text: Substring, also extra: Character? = nil) -> Substring {
        let isTrimmed: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == extra }
        guard let first = text.firstIndex(where: { !isTrimmed($0) }),
            let last = text.lastIndex(where: { !isTrimmed($0) })
        else { return "" }
        return text[first...last]
    }

    /// The lower-cased field names that `Vary` values list.
    static func varyNames(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }.map { trimmed($0).lowercased() }.filter { !$0.isEmpty }
    }
}

/// HTTP dates (RFC 9110 section 5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime forms.
enum HTTPDate {
    private static let formats = [
        "EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy",
    ]
    private static let formatters = Locked(
        formats.map { format -> DateFormatter in
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            return formatter
        })

    static func parse(_ text: String) -> Date? {
        formatters.withLock { formatters in
            for formatter in formatters {
                if let date = formatter.date(from: text.trimmingCharacters(in: .whitespaces)) { return date }
            }
            return nil
        }
    }
}
