import Courier
import Foundation
import Logging
import Testing

/// Files Courier reads back (resume data, background journal entries, the cache index, the
/// cookie jar) are data, not authority: an entry that names a file elsewhere, an offset past
/// what is on disk, or a malformed line is refused or dropped, and the file it names is left
/// as it was.
@Suite struct TamperedStateTests {
    static let precious = Data("precious bytes that must survive\n".utf8)

    /// A file with known bytes in a directory of its own, away from any download.
    static func victim() throws -> URL {
        let file = try DownloadTests.temporaryDirectory().appendingPathComponent("victim.txt")
        try precious.write(to: file)
        return file
    }

    /// A partial file of the form Courier makes, next to `destination`, written by hand (as a
    /// tampered or hand-made resume data would name it).
    static func handMadePartial(for destination: URL, _ bytes: Data) throws -> URL {
        let file = destination.deletingLastPathComponent().appendingPathComponent(
            ".\(destination.lastPathComponent).0123ABCD.download")
        try bytes.write(to: file)
        return file
    }

    static func resumeData(_ fault: URL, _ name: String, total: Int, partial: URL, bytesWritten: Int64) -> ResumeData {
        ResumeData(
            url: fault.appendingPathComponent("file/\(name)").appending(queryItems: [
                .init(name: "n", value: String(total))
            ]), partialFile: partial, bytesWritten: bytesWritten, validator: "\"\(name)-\(total)\"")
    }

    /// Downloads with `resumeData` and expects the refusal, before anything was sent.
    static func expectRefusal(
        _ api: HTTPSessionManager, _ resumeData: ResumeData, to destination: URL, name: String, saying reason: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let error = await capturedError(sourceLocation: sourceLocation) {
            _ = try await api.downloadTask(resumingFrom: resumeData, to: destination).value
        }
        guard case CourierError.fileSystem(let context)? = error else {
            Issue.record("expected fileSystem, got \(String(describing: error))", sourceLocation: sourceLocation)
            return
        }
        #expect(context.message.hasPrefix("Cannot resume the download:"), sourceLocation: sourceLocation)
        #expect(context.message.contains(reason), "\(context.message)", sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: destination.path), sourceLocation: sourceLocation)
        let stats = try await DownloadTests.stats(api, name)
        #expect(stats["requests"] == 0, sourceLocation: sourceLocation)
    }

    // MARK: Resume data

    @Test func resumeDataNamingAFileElsewhereIsRefusedAndTheFileIsUntouched() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let victim = try Self.victim()
        let name = DownloadTests.uniqueName("elsewhere")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: victim, bytesWritten: 10)
        try await Self.expectRefusal(api, resumeData, to: destination, name: name, saying: victim.path)
        #expect(try Data(contentsOf: victim) == Self.precious)
        #expect(try DownloadTests.contents(directory) == [])
    }

    @Test func resumeDataWithDotDotIsRefusedAndTheFileIsUntouched() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        // Of Courier's form, but in another directory, reached through `..`.
        let elsewhere = try DownloadTests.temporaryDirectory()
        let victim = try Self.handMadePartial(for: elsewhere.appendingPathComponent("file.bin"), Self.precious)
        let sneaky = URL(
            fileURLWithPath: directory.path + "/../\(elsewhere.lastPathComponent)/\(victim.lastPathComponent)")
        let name = DownloadTests.uniqueName("dotdot")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: sneaky, bytesWritten: 10)
        try await Self.expectRefusal(api, resumeData, to: destination, name: name, saying: "..")
        #expect(try Data(contentsOf: victim) == Self.precious)
        #expect(try DownloadTests.contents(directory) == [])
    }

    @Test func resumeDataNamingASymbolicLinkIsRefusedAndItsTargetIsUntouched() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let victim = try Self.victim()
        let link = directory.appendingPathComponent(".file.bin.0123ABCD.download")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: victim)
        let name = DownloadTests.uniqueName("symlink")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: link, bytesWritten: 10)
        try await Self.expectRefusal(api, resumeData, to: destination, name: name, saying: "symbolic link")
        #expect(try Data(contentsOf: victim) == Self.precious)
        #expect(try DownloadTests.contents(directory) == [".file.bin.0123ABCD.download"])
    }

    @Test func resumeDataNamingAnotherFileNextToTheDestinationIsRefused() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let neighbour = directory.appendingPathComponent("notes.txt")
        try Self.precious.write(to: neighbour)
        let name = DownloadTests.uniqueName("neighbour")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: neighbour, bytesWritten: 10)
        try await Self.expectRefusal(api, resumeData, to: destination, name: name, saying: "not a partial file")
        #expect(try Data(contentsOf: neighbour) == Self.precious)
        #expect(try DownloadTests.contents(directory) == ["notes.txt"])
    }

    @Test func negativeBytesWrittenIsRefused() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let partial = try Self.handMadePartial(for: destination, faultBytes(5000).prefix(1000))
        let name = DownloadTests.uniqueName("negative")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: partial, bytesWritten: -5)
        try await Self.expectRefusal(api, resumeData, to: destination, name: name, saying: "-5")
        #expect(try Data(contentsOf: partial) == faultBytes(5000).prefix(1000))
    }

    @Test func bytesWrittenPastThePartialFileResumesFromWhatIsOnDisk() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let partial = try Self.handMadePartial(for: destination, faultBytes(5000).prefix(1000))
        let name = DownloadTests.uniqueName("past")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: partial, bytesWritten: 3000)
        let file = try await api.downloadTask(resumingFrom: resumeData, to: destination).value
        #expect(try Data(contentsOf: file) == faultBytes(5000))
        #expect(try DownloadTests.contents(directory) == ["file.bin"])
        let stats = try await DownloadTests.stats(api, name)
        #expect(stats["ranges"] == ["bytes=1000-"])
    }

    @Test func aHugeBytesWrittenMakesNoSparseFile() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let partial = try Self.handMadePartial(for: destination, faultBytes(5000).prefix(1000))
        let name = DownloadTests.uniqueName("huge")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: partial, bytesWritten: Int64.max / 2)
        let file = try await api.downloadTask(resumingFrom: resumeData, to: destination).value
        #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int == 5000)
        #expect(try Data(contentsOf: file) == faultBytes(5000))
        let stats = try await DownloadTests.stats(api, name)
        #expect(stats["ranges"] == ["bytes=1000-"])
    }

    @Test func aPartialFileLongerThanBytesWrittenIsCutBack() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        // Garbage past the resume point (a previous attempt wrote more than it recorded).
        let partial = try Self.handMadePartial(
            for: destination, faultBytes(5000).prefix(1000) + Data(repeating: 0xEE, count: 500))
        let name = DownloadTests.uniqueName("longer")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: partial, bytesWritten: 1000)
        let file = try await api.downloadTask(resumingFrom: resumeData, to: destination).value
        #expect(try Data(contentsOf: file) == faultBytes(5000))
    }

    @Test func newPartialFileIsOfTheFormResumeDataIsAcceptedWith() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let destination = directory.appendingPathComponent("file.bin")
        let partial = ResumeData.newPartialFile(for: destination)
        #expect(partial.deletingLastPathComponent().path == directory.path)
        #expect(partial.lastPathComponent.hasPrefix(".file.bin."))
        #expect(partial.lastPathComponent.hasSuffix(".download"))
        #expect(partial != ResumeData.newPartialFile(for: destination))
        try faultBytes(5000).prefix(2000).write(to: partial)
        let name = DownloadTests.uniqueName("helper")
        let resumeData = Self.resumeData(fault, name, total: 5000, partial: partial, bytesWritten: 2000)
        let file = try await api.downloadTask(resumingFrom: resumeData, to: destination).value
        #expect(try Data(contentsOf: file) == faultBytes(5000))
        #expect(try DownloadTests.contents(directory) == ["file.bin"])
    }

    // MARK: Background journal

    @Test func journalEntriesNamingFilesElsewhereAreDroppedAndTheFilesUntouched() async throws {
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let identifier = "tampered-\(UUID().uuidString)"
        let journal = directory.appendingPathComponent("background/\(identifier)/tasks")
        try FileManager.default.createDirectory(at: journal, withIntermediateDirectories: true)
        let downloads = directory.appendingPathComponent("downloads")
        try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
        let name = DownloadTests.uniqueName("journal")
        let url = fault.absoluteString + "file/\(name)?n=5000"
        // Without a validator the restore would start over and delete the partial file; with
        // one it would append to it and move it onto the destination.
        let unlinked = try Self.victim()
        let appended = try Self.victim()
        let outsider = try Self.victim()
        let entries: [[String: Any]] = [
            ["destination": downloads.appendingPathComponent("a").path, "partialFile": unlinked.path],
            [
                "destination": downloads.appendingPathComponent("b").path, "partialFile": appended.path,
                "validator": "\"\(name)-5000\"",
            ],
            // A partial file of Courier's form, but the destination is reached through `..`.
            [
                "destination": downloads.path + "/../../\(outsider.deletingLastPathComponent().lastPathComponent)/c",
                "partialFile": outsider.deletingLastPathComponent().appendingPathComponent(".c.0123ABCD.download")
                    .path,
            ],
        ]
        for entry in entries {
            let id = UUID()
            var record: [String: Any] = [
                "identifier": id.uuidString, "kind": "download", "method": "GET", "url": url, "headers": [:],
            ]
            record.merge(entry) { $1 }
            try JSONSerialization.data(withJSONObject: record).write(
                to: journal.appendingPathComponent("\(id.uuidString).json"))
        }
        try Self.precious.write(
            to: outsider.deletingLastPathComponent().appendingPathComponent(".c.0123ABCD.download"))
        try Data("not a record".utf8).write(to: journal.appendingPathComponent("\(UUID().uuidString).json"))

        let recorder = LogRecorder()
        var configuration = HTTPSessionConfiguration.background(identifier: identifier)
        configuration.storageDirectory = directory
        let api = HTTPSessionManager(baseURL: fault, configuration: configuration, logger: recorder.logger)
        let tasks = try await api.restoredTasks()
        #expect(tasks.isEmpty)
        for victim in [unlinked, appended, outsider] {
            #expect(try Data(contentsOf: victim) == Self.precious)
        }
        #expect(
            try Data(
                contentsOf: outsider.deletingLastPathComponent().appendingPathComponent(".c.0123ABCD.download"))
                == Self.precious)
        #expect(try DownloadTests.contents(downloads) == [])
        #expect(try DownloadTests.contents(journal) == [])
        let stats = try await DownloadTests.stats(try await faultManager(), name)
        #expect(stats["requests"] == 0)
        #expect(recorder.messages.filter { $0.contains("journal") }.count == 4, "\(recorder.messages)")
        api.invalidateAndCancel()
    }

    // MARK: Cache index

    static func cacheConfiguration(_ directory: URL) -> HTTPSessionConfiguration {
        var configuration = HTTPSessionConfiguration.default
        configuration.storageDirectory = directory
        return configuration
    }

    /// The lines of the cache's journal (`index.journal`: one JSON record per store, removal
    /// or batch of uses since the snapshot in `index.json`), as dictionaries to tamper with.
    static func journalRecords(_ directory: URL) throws -> [[String: Any]] {
        let data = try Data(contentsOf: directory.appendingPathComponent("cache/index.journal"))
        return try data.split(separator: UInt8(ascii: "\n")).map {
            try #require(try JSONSerialization.jsonObject(with: Data($0)) as? [String: Any])
        }
    }

    static func writeJournal(_ records: [[String: Any]], _ directory: URL) throws {
        var data = Data()
        for record in records { data += try JSONSerialization.data(withJSONObject: record) + Data("\n".utf8) }
        try data.write(to: directory.appendingPathComponent("cache/index.journal"))
    }

    /// Stores a response to `cache/60` and returns the index as a snapshot (`index.json`)
    /// would hold it, as a dictionary to tamper with. The journal that holds it is removed, so
    /// that the snapshot the test writes is the whole index (as a cache written before the
    /// journal has it).
    static func storedIndex(_ directory: URL, _ server: URL) async throws -> [String: [String: Any]] {
        let first = HTTPSessionManager(baseURL: server, configuration: cacheConfiguration(directory))
        _ = try await first.request(.get, "cache/60", serializer: DataResponseSerializer())
        first.invalidateAndCancel()
        var index: [String: [String: Any]] = [:]
        for record in try journalRecords(directory) where record["op"] as? String == "store" {
            let key = try #require(record["key"] as? String)
            index[key] = record.filter { ["file", "size", "lastUse"].contains($0.key) }
        }
        try FileManager.default.removeItem(at: directory.appendingPathComponent("cache/index.journal"))
        return index
    }

    @Test func aCacheIndexNamingAFileOutsideTheCacheIsIgnored() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let server = try await TestServers.httpbin()
        var index = try await Self.storedIndex(directory, server)
        #expect(index.count == 1)
        let victim = try Self.victim()
        for key in index.keys {
            index[key]?["file"] = "../../\(victim.deletingLastPathComponent().lastPathComponent)/victim.txt"
        }
        try JSONSerialization.data(withJSONObject: index).write(
            to: directory.appendingPathComponent("cache/index.json"))

        let recorder = LogRecorder()
        let api = HTTPSessionManager(
            baseURL: server, configuration: Self.cacheConfiguration(directory), logger: recorder.logger)
        #expect(api.cache?.count == 0)
        let response = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        #expect(response.source == .network)
        #expect(try Data(contentsOf: victim) == Self.precious)
        #expect(recorder.messages.contains { $0.contains("cache") }, "\(recorder.messages)")
    }

    @Test func aCacheJournalRecordNamingAFileOutsideTheCacheIsIgnored() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let server = try await TestServers.httpbin()
        let first = HTTPSessionManager(baseURL: server, configuration: Self.cacheConfiguration(directory))
        _ = try await first.request(.get, "cache/60", serializer: DataResponseSerializer())
        first.invalidateAndCancel()
        var records = try Self.journalRecords(directory)
        #expect(records.count == 1)
        let victim = try Self.victim()
        for index in records.indices {
            records[index]["file"] = "../../\(victim.deletingLastPathComponent().lastPathComponent)/victim.txt"
        }
        try Self.writeJournal(records, directory)

        let recorder = LogRecorder()
        let api = HTTPSessionManager(
            baseURL: server, configuration: Self.cacheConfiguration(directory), logger: recorder.logger)
        #expect(api.cache?.count == 0)
        let response = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        #expect(response.source == .network)
        #expect(try Data(contentsOf: victim) == Self.precious)
        #expect(recorder.messages.contains { $0.contains("cache journal record") }, "\(recorder.messages)")
    }

    @Test func cacheIndexEntriesWithAbsurdSizesAreDropped() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let server = try await TestServers.httpbin()
        let stored = try await Self.storedIndex(directory, server)
        let (key, entry) = try #require(stored.first)
        var index: [String: [String: Any]] = [:]
        for (suffix, size) in [("negative", Int64(-1_000_000)), ("huge", Int64.max)] {
            var tampered = entry
            tampered["size"] = size
            index[key + "?" + suffix] = tampered
        }
        try JSONSerialization.data(withJSONObject: index).write(
            to: directory.appendingPathComponent("cache/index.json"))

        let api = HTTPSessionManager(baseURL: server, configuration: Self.cacheConfiguration(directory))
        #expect(api.cache?.count == 0)
        #expect(api.cache?.totalSize == 0)
    }

    // MARK: Cookie jar

    @Test func malformedJarLinesAreDroppedAndLogged() async throws {
        let directory = try DownloadTests.temporaryDirectory()
        let httpbin = try await TestServers.httpbin()
        let host = httpbin.host!
        let future = Int(Date().timeIntervalSince1970) + 3600
        let lines = [
            "garbage\u{1}",
            "\(host)\tFALSE\t/\tFALSE\t\(future)\tsurvivor\tyes",
            "\(host)\tFALSE\t/\tFALSE\tsoon\tbadexpiry\tx",
            "\(host) evil\tFALSE\t/\tFALSE\t\(future)\tbaddomain\tx",
            "\(host)\tFALSE\tnoslash\tFALSE\t\(future)\tbadpath\tx",
            "\(host)\tFALSE\t/\tFALSE\t\(future)\tbad\u{7}name\tx",
        ]
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: directory.appendingPathComponent("cookies.txt"))
        let recorder = LogRecorder()
        let api = HTTPSessionManager(
            baseURL: httpbin, configuration: Self.cacheConfiguration(directory), logger: recorder.logger)
        let echo: JSON = try await api.GET("cookies")
        #expect(echo["cookies"] == ["survivor": "yes"])
        #expect(recorder.messages.contains { $0.contains("cookie") && $0.contains("5") }, "\(recorder.messages)")
    }
}
