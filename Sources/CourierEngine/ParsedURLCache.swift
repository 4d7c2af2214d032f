/// libcurl's parse of the URLs an engine requested lately (`CURLOPT_CURLU`), made once and
/// shared by every transfer to the same URL while it is cached: a parse costs more than a
/// lookup, and an API client asks for few URLs many times. The last URL is compared before the
/// table is hashed (the common case of one URL again and again). When the table holds
/// `capacity` URLs it is emptied; transfers keep the parses they use. Engine thread.
struct ParsedURLCache {
    private var entries: [String: ParsedURL] = [:]
    private var last: (url: String, parsed: ParsedURL)?
    let capacity: Int

    init(capacity: Int = 256) {
        self.capacity = max(1, capacity)
    }

    /// The parse of `url`, made on first use; nil when libcurl does not accept the URL.
    mutating func parsed(_ url: String) -> ParsedURL? {
        if let last, last.url == url { return last.parsed }
        if let parsed = entries[url] {
            last = (url, parsed)
            return parsed
        }
        guard let parsed = ParsedURL(url) else { return nil }
        if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
        entries[url] = parsed
        last = (url, parsed)
        return parsed
    }

    /// The URLs held.
    var count: Int { entries.count }

    mutating func removeAll() {
        entries.removeAll()
        last = nil
    }
}
