import Courier
import Foundation
import HTTPTypes

/// What the command line asks for: method, URL, headers and body.
struct Invocation {
    /// How the body is sent.
    enum Body {
        case none
        case data(Data)
        /// `@path`: the file is the body.
        case file(URL)
        /// `name@path` items: a multipart form with the text fields and the files.
        case multipart(fields: [(String, String)], files: [(String, URL)])
    }

    var method: HTTPRequest.Method
    var url: String
    var headers: [String: String] = [:]
    var body = Body.none
    /// The request's own options (`--max-size`), for every way it is sent.
    var options = RequestOptions()

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
        var textFields: [(String, String)] = []
        var files: [(String, URL)] = []
        var bodyFile: URL?
        var hasFields = false
        var hasJSONFields = false
        for item in items {
            switch item {
            case .header(let name, let value): headers[name] = value
            case .query(let name, let value): query[name] = Self.appending(value: .string(value), to: query[name])
            case .field(let name, let value):
                fields[name] = .string(value)
                textFields.append((name, value))
                hasFields = true
            case .filePart(let name, let path):
                files.append((name, URL(fileURLWithPath: path)))
                hasFields = true
            case .bodyFile(let path):
                guard bodyFile == nil else { throw CLIError("Only one @file body") }
                bodyFile = URL(fileURLWithPath: path)
            case .jsonField(let name, let value):
                guard !form else { throw CLIError("'\(name):=' needs a JSON body; drop --form") }
                fields[name] = value
                hasFields = true
                hasJSONFields = true
            }
        }

        method = explicitMethod ?? (hasFields || bodyFile != nil ? .post : .get)
        url = Self.expand(rawURL)
        if query != [:] {
            url += (url.contains("?") ? "&" : "?") + (try QueryStringEncoding.encode(query))
        }
        if let bodyFile {
            guard !hasFields else { throw CLIError("@file sends the file as the body: drop the other fields") }
            body = .file(bodyFile)
        } else if !files.isEmpty {
            guard !hasJSONFields else { throw CLIError("name:=json fields cannot go into a multipart form") }
            body = .multipart(fields: textFields, files: files)
        } else if hasFields {
            if form {
                body = .data(Data(try QueryStringEncoding.encode(fields).utf8))
                setDefaultHeader("Content-Type", "application/x-www-form-urlencoded")
            } else {
                body = .data(fields.serialized())
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

    /// Sends the request; any status is a response here (`--check-status` judges it later),
    /// except those in `failing`, which fail the attempt (so that `--retry` sees them; the last
    /// one's response then arrives as the error's). Uploads report their progress to `progress`.
    func send(
        with api: HTTPSessionManager, progress: ProgressDisplay?, failing: Set<Int> = []
    ) async throws -> DataResponse<Data> {
        let serializer = DataResponseSerializer(acceptableStatusCodes: (100..<1000).filter { !failing.contains($0) })
        let upload: UploadBody
        switch body {
        case .none:
            return try await api.request(method, url, headers: headers, options: options, serializer: serializer)
        case .data(let data):
            return try await api.request(
                method, url, body: data, headers: headers, options: options, serializer: serializer)
        case .file(let file):
            upload = .file(file)
        case .multipart(let fields, let files):
            var form = MultipartFormData()
            for (name, value) in fields { form.append(value, name: name) }
            for (name, file) in files { try form.append(fileAt: file, name: name) }
            upload = .multipart(form)
        }
        let task = api.uploadTask(method, url, body: upload, headers: headers, options: options, serializer: serializer)
        if let progress {
            Task { for await value in task.uploadProgress { progress.show(value, verb: "uploaded") } }
        }
        let response = try await task.response
        progress?.finish()
        return response
    }

    /// The request body as text for `--verbose` (files are named, not read).
    var bodyDescription: Data? {
        switch body {
        case .none: nil
        case .data(let data): data
        case .file(let file): Data("<the contents of \(file.path)>".utf8)
        case .multipart(let fields, let files):
            Data(
                (fields.map { "\($0.0)=\($0.1)" } + files.map { "\($0.0)@\($0.1.path)" }).joined(separator: "\n").utf8)
        }
    }
}
