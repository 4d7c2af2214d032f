import Courier
@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

extension StubTransport {
    /// A stub that answers from a HAR file (`HARRecorder`'s, or a browser's or a proxy's
    /// export): a request gets the response of the first entry with its method and URL (and
    /// the same values of `fields`, when given) that has not answered yet, or of the last such
    /// entry when all have. A request that no entry matches fails with
    /// `CourierError.transport`, whose message names the closest entry.
    ///
    /// ```swift
    /// let stub = try StubTransport(replaying: URL(fileURLWithPath: "Fixtures/checkout.har"))
    /// configuration.transport = stub.transport
    /// ```
    ///
    /// The recorded bodies are the decoded ones: the replayed responses leave out
    /// `Content-Encoding`, `Content-Length` and `Transfer-Encoding`, and fields a recorder
    /// redacted (`<redacted>`). A file that is not HAR throws `CourierError.invalidResponse`.
    public convenience init(replaying file: URL, matching fields: [HTTPField.Name] = []) throws {
        self.init()
        let entries = try HARArchive.entries(in: file)
        let used = Locked(Set<Int>())
        let name = file.lastPathComponent
        stub(
            where: { _ in true },
            respond: { recorded in
                let method = recorded.request.method.rawValue
                let url = recorded.url.absoluteString
                let matching = entries.indices.filter { index in
                    let entry = entries[index]
                    return entry.method == method && entry.url == url
                        && fields.allSatisfy { entry.requestFields[$0] == recorded.request.headerFields[$0] }
                }
                guard let last = matching.last else {
                    throw CourierError.transport(
                        .init(
                            url: recorded.url,
                            message: "No exchange in \(name) answers \(method) \(url): "
                                + HARArchive.closest(to: "\(method) \(url)", in: entries)))
                }
                let index = used.withLock { used in
                    let index = matching.first { !used.contains($0) } ?? last
                    used.insert(index)
                    return index
                }
                return entries[index].response
            })
    }
}

/// The exchanges of a HAR file, as a stub replays them.
enum HARArchive {
    struct Entry: Sendable {
        var method: String
        var url: String
        var requestFields: HTTPFields
        var response: StubResponse
    }

    /// Fields a replayed response leaves out: the body is stored decoded, whole.
    private static let framingFields: Set<HTTPField.Name> = [.contentEncoding, .contentLength, .transferEncoding]

    static func entries(in file: URL) throws -> [Entry] {
        func invalid(_ why: String) -> CourierError {
            .invalidResponse(.init(url: file, message: "\(file.lastPathComponent) is not a HAR file: \(why)"))
        }
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw CourierError.fileSystem(.init(url: file, message: "\(file.path) cannot be read: \(error)"))
        }
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let log = root["log"] as? [String: Any], let list = log["entries"] as? [[String: Any]]
        else { throw invalid("no log.entries") }
        return try list.enumerated().map { index, entry in
            guard let request = entry["request"] as? [String: Any], let response = entry["response"] as? [String: Any],
                let method = request["method"] as? String, let url = request["url"] as? String,
                let status = response["status"] as? Int
            else { throw invalid("entry \(index + 1) has no request method and URL, or no response status") }
            var responseFields = HTTPFields()
            for field in fields(response["headers"]) where !framingFields.contains(field.name) {
                responseFields.append(field)
            }
            let content = response["content"] as? [String: Any]
            var body = Data()
            if let text = content?["text"] as? String {
                body =
                    content?["encoding"] as? String == "base64" ? Data(base64Encoded: text) ?? Data() : Data(text.utf8)
            }
            let reason = response["statusText"] as? String ?? ""
            return Entry(
                method: method, url: URL(string: url)?.absoluteString ?? url,
                requestFields: HTTPFields(fields(request["headers"])),
                response: StubResponse(
                    status: HTTPResponse.Status(code: status, reasonPhrase: reason), headerFields: responseFields,
                    body: body))
        }
    }

    /// The `[{name, value}]` list as fields, without the ones a recorder redacted.
    private static func fields(_ list: Any?) -> [HTTPField] {
        ((list as? [[String: Any]]) ?? []).compactMap { item in
            guard let name = (item["name"] as? String).flatMap({ HTTPField.Name($0) }),
                let value = item["value"] as? String,
                value != "<redacted>", name.canonicalName != "host"
            else { return nil }
            return HTTPField(name: name, value: value)
        }
    }

    /// The entry whose `METHOD URL` shares the longest start with `wanted`, in words.
    static func closest(to wanted: String, in entries: [Entry]) -> String {
        guard !entries.isEmpty else { return "the file has no entries" }
        var best = (index: 0, shared: -1)
        for (index, entry) in entries.enumerated() {
            let shared = zip(wanted, "\(entry.method) \(entry.url)").prefix { $0 == $1 }.count
            if shared > best.shared { best = (index, shared) }
        }
        let entry = entries[best.index]
        return "the closest recorded is \(entry.method) \(entry.url) (entry \(best.index + 1) of \(entries.count))"
    }
}
