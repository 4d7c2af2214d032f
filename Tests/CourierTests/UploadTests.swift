import Courier
import Foundation
import Testing

/// Uploads against the fault server's `/echo`, which reports the length and SHA-256 of what it
/// received, and whether it came chunked.
@Suite struct UploadTests {
    static func temporaryFile(_ data: Data) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("courier-upload-\(UUID().uuidString)")
        try data.write(to: url)
        return url
    }

    @Test func aFileArrivesByteIdenticalWithAnExactLength() async throws {
        let api = try await faultManager()
        let body = faultBytes(5_000_000)
        let file = try Self.temporaryFile(body)
        let task = api.uploadTask(.put, "echo", fromFile: file)
        var progress: [TransferProgress] = []
        for await value in task.uploadProgress { progress.append(value) }
        let echo = try await task.value
        #expect(echo["method"] == "PUT")
        #expect(echo["bodyLength"] == 5_000_000)
        #expect(echo["sha256"] == .string(SHA256.hex(body)))
        #expect(echo["chunked"] == false)
        #expect(echo["headers"]["Content-Length"] == "5000000")
        #expect(progress.last == TransferProgress(completedBytes: 5_000_000, totalBytes: 5_000_000))
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
    }

    @Test func aStreamArrivesByteIdenticalAndChunked() async throws {
        let api = try await faultManager()
        let chunks = (0..<50).map { index in Data(repeating: UInt8(index), count: 65_537) }
        let stream = chunks.async
        let echo = try await api.uploadTask(
            .post, "echo", body: .stream(stream, contentType: "application/octet-stream")
        ).value
        #expect(echo["chunked"] == true)
        #expect(echo["bodyLength"] == .int(50 * 65_537))
        #expect(echo["sha256"] == .string(SHA256.hex(chunks.reduce(Data(), +))))
        #expect(echo["headers"]["Content-Type"] == "application/octet-stream")
    }

    @Test func aStreamOfDeclaredLengthIsSentWithContentLength() async throws {
        let api = try await faultManager()
        let chunks = (0..<20).map { index in Data(repeating: UInt8(index), count: 50_000) }
        let stream = chunks.async
        let echo = try await api.uploadTask(.post, "echo", body: .stream(stream, length: 1_000_000)).value
        #expect(echo["chunked"] == false)
        #expect(echo["headers"]["Content-Length"] == "1000000")
        #expect(echo["sha256"] == .string(SHA256.hex(chunks.reduce(Data(), +))))
        // A stream that gives more than it declared fails before the server gets a wrong body.
        let longer = chunks.async
        let error = await capturedError {
            _ = try await api.uploadTask(.post, "echo", body: .stream(longer, length: 999_999)).value
        }
        #expect(isCourierError(error) { if case .serializationFailed = $0 { true } else { false } })
        #expect("\(error.map { "\($0)" } ?? "")".contains("more than its declared length of 999999 bytes"))
    }

    @Test func dataUploadsAndGzipCompressedBodies() async throws {
        let api = try await faultManager()
        let body = Data(String(repeating: "compress me ", count: 100_000).utf8)
        let plain = try await api.uploadTask(.post, "echo", body: .data(body)).value
        #expect(plain["sha256"] == .string(SHA256.hex(body)))
        let compressed = try await api.uploadTask(.post, "echo", body: .data(body), compressed: true).value
        #expect(compressed["headers"]["Content-Encoding"] == "gzip")
        #expect(compressed["chunked"] == true)
        let received = try #require(compressed["bodyLength"].intValue)
        #expect(received < body.count / 20)
    }

    @Test func aGzipBodyInflatesToTheOriginal() async throws {
        // httpbin echoes a binary body as base64; gunzip checks the stream and restores it.
        let api = try await httpbinManager()
        let body = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 / 7) })
        let echo = try await api.uploadTask(
            .post, "post", body: .data(body, contentType: "application/octet-stream"), compressed: true
        ).value
        let text = try #require(echo["data"].stringValue)
        let base64 = try #require(text.split(separator: ",", maxSplits: 1).last)
        let compressed = try #require(Data(base64Encoded: String(base64)))
        let file = try UploadTests.temporaryFile(compressed)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "gunzip -c < '\(file.path)'"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let inflated = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(inflated == body)
    }

    @Test func aMissingFileFailsBeforeAnythingIsSent() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            _ = try await api.uploadTask(.put, "echo", fromFile: URL(fileURLWithPath: "/nonexistent/file")).value
        }
        #expect(isCourierError(error!) { if case .fileSystem = $0 { true } else { false } })
    }

    @Test func aFileBodyIsSentAgainAfterA307() async throws {
        let api = try await faultManager()
        let body = faultBytes(2_000_000)
        let file = try Self.temporaryFile(body)
        let echo = try await api.uploadTask(.put, "redirect?status=307&to=%2Fecho", body: .file(file)).value
        #expect(echo["method"] == "PUT")
        #expect(echo["sha256"] == .string(SHA256.hex(body)))
    }

    @Test func aStreamBodyCannotBeSentAgainAfterA307() async throws {
        let api = try await faultManager()
        let stream = [Data(repeating: 1, count: 2_000_000)].async
        let error = await capturedError {
            _ = try await api.uploadTask(.put, "redirect?status=307&to=%2Fecho", body: .stream(stream)).value
        }
        #expect(isCourierError(error!) { if case .serializationFailed = $0 { true } else { false } })
    }
}

actor Counter {
    private(set) var value = 0
    func add(_ amount: Int) -> Int {
        value += amount
        return value
    }
}

extension UploadTests {
    static func file(named name: String, _ text: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    /// httpbin parses a form body into `form` and leaves `data` empty: the bytes are lost.
    @Test func aFileUploadWithoutATypeGetsOneFromItsExtension() async throws {
        let api = try await httpbinManager()
        let json = try Self.file(named: "report.json", #"{"rows": 3}"#)
        let echo = try await api.uploadTask(.put, "anything", fromFile: json).value
        #expect(echo["headers"]["Content-Type"] == "application/json")
        #expect(echo["json"] == ["rows": 3])
        #expect(echo["form"] == [:])

        let unknown = try Self.file(named: "dump.xyz", "a=1&b=2")
        let raw = try await api.uploadTask(.put, "anything", fromFile: unknown).value
        #expect(raw["headers"]["Content-Type"] == "application/octet-stream")
        #expect(raw["data"] == "a=1&b=2")
        #expect(raw["form"] == [:])
    }

    @Test func aDataUploadWithoutATypeIsAnOctetStream() async throws {
        let api = try await httpbinManager()
        let echo = try await api.uploadTask(.post, "anything", body: .data(Data("x=1".utf8))).value
        #expect(echo["headers"]["Content-Type"] == "application/octet-stream")
        #expect(echo["data"] == "x=1")
        // A type given is kept.
        let typed = try await api.uploadTask(
            .post, "anything", body: .data(Data("x=1".utf8), contentType: "application/x-www-form-urlencoded")
        ).value
        #expect(typed["form"] == ["x": "1"])
    }
}
