import Courier
import Foundation
import HTTPTypes
import Testing

/// Defects a new user ran into: each test failed on the code before its fix.
@Suite struct RequestDefectTests {
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

extension RequestDefectTests {
    /// A resumed download used to report from zero, with the remaining bytes as the total: a
    /// progress bar jumped back.
    @Test func aResumedDownloadReportsTheBytesOnDiskAndTheFullSize() async throws {
        let api = try await faultManager()
        let name = "resume-progress-\(UUID().uuidString)"
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        // 32 s at 250 kB/s: still running when the test cancels it, however slow the machine.
        let total = 8_000_000
        let first = api.downloadTask("file/\(name)", parameters: ["n": .int(total)], to: destination)
        first.setMaximumBytesPerSecond(250_000)
        for await progress in first.downloadProgress where progress.completedBytes > 100_000 { break }
        let resumeData = try #require(await first.cancel(producingResumeData: true))
        #expect(resumeData.bytesWritten > 0 && resumeData.bytesWritten < Int64(total))

        let resumed = api.downloadTask(resumingFrom: resumeData, to: destination)
        var seen: [TransferProgress] = []
        for await progress in resumed.downloadProgress { seen.append(progress) }
        _ = try await resumed.value
        #expect(try Data(contentsOf: destination) == faultBytes(total))
        // Past the stream's starting value (zero of unknown), progress starts at the bytes on
        // disk and counts to the whole file.
        let reported = seen.filter { $0.totalBytes != nil }
        #expect(reported.first?.completedBytes == resumeData.bytesWritten)
        #expect(reported.allSatisfy { $0.totalBytes == Int64(total) })
        #expect(reported.last?.completedBytes == Int64(total))
    }
}

extension RequestDefectTests {
    /// `http://user:password@host/` used to lose its user info: the request went out without
    /// credentials.
    @Test func credentialsInTheURLAreSentToThatOriginOnly() async throws {
        let httpbin = try await TestServers.httpbin()
        let port = try #require(httpbin.port)
        let api = try await httpbinManager()
        let basic: JSON = try await api.GET("http://ada:l%40velace@127.0.0.1:\(port)/basic-auth/ada/l@velace")
        #expect(basic["authenticated"] == true)
        #expect(basic["user"] == "ada")

        // In the base URL too.
        let based = HTTPSessionManager(
            baseURL: URL(string: "http://ada:lovelace@127.0.0.1:\(port)/"), configuration: .ephemeral)
        let fromBase: JSON = try await based.GET("basic-auth/ada/lovelace")
        #expect(fromBase["authenticated"] == true)

        // A redirect to another origin (localhost is another origin for the same httpbin) does
        // not take the credential along; one within the origin does.
        let same: JSON = try await based.GET("redirect-to", parameters: ["url": "/headers"])
        #expect(same["headers"]["Authorization"] == .string("Basic " + Data("ada:lovelace".utf8).base64EncodedString()))
        let other: JSON = try await based.GET(
            "redirect-to", parameters: ["url": .string("http://localhost:\(port)/headers")])
        #expect(other["headers"]["Host"] == .string("localhost:\(port)"))
        #expect(other["headers"]["Authorization"] == nil)
    }
}
