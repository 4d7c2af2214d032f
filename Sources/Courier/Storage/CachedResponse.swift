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
        for name in CacheControl.varyNames(response.headerFields) {
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

    init(_ values: [String]) {
        for directive in values.flatMap({ $0.split(separator: ",") }) {
            let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            switch parts[0].lowercased() {
            case "max-age":
                maxAge =
                    parts.count == 2
                    ? TimeInterval(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))) : nil
            case "no-store": noStore = true
            case "no-cache": noCache = true
            case "must-revalidate", "proxy-revalidate": mustRevalidate = true
            case "public", "s-maxage": isPublic = true
            default: break
            }
        }
    }

    /// The lower-cased field names a response's `Vary` lists.
    static func varyNames(_ fields: HTTPFields) -> [String] {
        fields[values: .vary].flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }.filter { !$0.isEmpty }
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
