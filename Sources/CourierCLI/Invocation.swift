import Courier
import Foundation
import HTTPTypes

/// What the command line asks for: method, URL, headers and body.
struct Invocation {
    var method: HTTPRequest.Method
    var url: String
    var headers: [String: String] = [:]
    var body: Data?

    init(arguments: [String], form: Bool) throws {
        var arguments = arguments[...]
        var explicitMethod: HTTPRequest.Method?
        if arguments.count >= 2, let first = arguments.first, first.allSatisfy({ $0.isLetter && $0.isUppercase }) {
            explicitMethod = HTTPRequest.Method(first)
            arguments = arguments.dropFirst()
        }
        guard let rawURL = arguments.first else { throw CLIError("Missing URL") }
        let items = try arguments.dropFirst().map(RequestItem.parse)

        var query: JSON = [:]
        var fields: JSON = [:]
        var hasFields = false
        for item in items {
            switch item {
            case .header(let name, let value): headers[name] = value
            case .query(let name, let value): query[name] = Self.appending(value: .string(value), to: query[name])
            case .field(let name, let value):
                fields[name] = .string(value)
                hasFields = true
            case .jsonField(let name, let value):
                guard !form else { throw CLIError("'\(name):=' needs a JSON body; drop --form") }
                fields[name] = value
                hasFields = true
            }
        }

        method = explicitMethod ?? (hasFields ? .post : .get)
        url = Self.expand(rawURL)
        if query != [:] {
            url += (url.contains("?") ? "&" : "?") + (try QueryStringEncoding.encode(query))
        }
        if hasFields {
            if form {
                body = Data(try QueryStringEncoding.encode(fields).utf8)
                setDefaultHeader("Content-Type", "application/x-www-form-urlencoded")
            } else {
                body = fields.serialized()
                setDefaultHeader("Content-Type", "application/json")
            }
            setDefaultHeader("Accept", "application/json, */*;q=0.5")
        }
    }

    /// Sets a header unless the command line set it (names compare case-insensitively).
    private mutating func setDefaultHeader(_ name: String, _ value: String) {
        guard !headers.keys.contains(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) else { return }
        headers[name] = value
    }

    /// `:8080/x` is `http://localhost:8080/x`; a URL without scheme gets `http://`.
    static func expand(_ url: String) -> String {
        if url.hasPrefix(":") { return "http://localhost" + url }
        if url.contains("://") { return url }
        return "http://" + url
    }

    /// Repeated query names become arrays (`a==1 a==2` -> `a[]=1&a[]=2`).
    static func appending(value: JSON, to existing: JSON) -> JSON {
        switch existing {
        case .null: return value
        case .array(let values): return .array(values + [value])
        default: return .array([existing, value])
        }
    }

    /// Sends the request; any status is a response here (`--check-status` judges it later).
    func send(with api: HTTPSessionManager) async throws -> DataResponse<Data> {
        let serializer = DataResponseSerializer(acceptableStatusCodes: 100..<1000)
        if let body {
            return try await api.request(method, url, body: body, headers: headers, serializer: serializer)
        }
        return try await api.request(method, url, headers: headers, serializer: serializer)
    }
}
