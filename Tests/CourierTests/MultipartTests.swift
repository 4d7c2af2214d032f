import Courier
import Foundation
import Testing

/// Multipart forms, parsed by httpbin (werkzeug) and counted by the fault server.
@Suite struct MultipartTests {
    @Test func httpbinParsesFieldsFilesNamesAndTypes() async throws {
        let api = try await httpbinManager()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("courier-mp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let photo = directory.appendingPathComponent("photo.png")
        try Data("PNGDATA".utf8).write(to: photo)
        let notes = directory.appendingPathComponent("Grüße “2024”.txt")
        try Data("héllo".utf8).write(to: notes)

        let reply: JSON = try await api.POST("post", parameters: ["title": "Holiday", "tags": ["a", "b"]]) { form in
            try form.append(fileAt: photo, name: "photo")
            try form.append(fileAt: notes, name: "notes")
            form.append(Data("thumb".utf8), name: "thumb", fileName: "t.jpg", mimeType: "image/jpeg")
            form.append("plain value", name: "comment")
        }
        #expect(reply["form"]["title"] == "Holiday")
        #expect(reply["form"]["tags[]"] == ["a", "b"])
        #expect(reply["form"]["comment"] == "plain value")
        #expect(reply["files"]["photo"] == "PNGDATA")
        #expect(reply["files"]["thumb"] == "thumb")
        #expect(reply["files"]["notes"] == "héllo")
        #expect(
            reply["headers"]["Content-Type"].stringValue?.hasPrefix("multipart/form-data; boundary=courier-") == true)
    }

    @Test func partsCarryTheirHeadersAndTypes() async throws {
        var form = MultipartFormData(boundary: "XyZ")
        form.append(Data("a".utf8), name: "file", fileName: "report.pdf")
        form.append(Data("{}".utf8), name: "meta", mimeType: "application/json", headers: ["X-Part": "1"])
        let api = try await faultManager()
        let echo = try await api.uploadTask(.post, "echo", body: .multipart(form)).value
        let expected = [
            "--XyZ\r\n",
            "Content-Disposition: form-data; name=\"file\"; filename=\"report.pdf\"\r\n",
            "Content-Type: application/pdf\r\n\r\n",
            "a\r\n",
            "--XyZ\r\n",
            "Content-Disposition: form-data; name=\"meta\"\r\n",
            "Content-Type: application/json\r\n",
            "X-Part: 1\r\n\r\n",
            "{}\r\n",
            "--XyZ--\r\n",
        ].joined()
        #expect(echo["sha256"] == .string(SHA256.hex(Data(expected.utf8))))
        #expect(echo["headers"]["Content-Type"] == "multipart/form-data; boundary=XyZ")
        #expect(echo["headers"]["Content-Length"] == .string(String(expected.utf8.count)))
        #expect(form.contentLength == Int64(expected.utf8.count))
    }

    @Test func aLargeFilePartIsStreamedWithAKnownLengthAndProgress() async throws {
        let api = try await faultManager()
        let file = try UploadTests.temporaryFile(faultBytes(3_000_000))
        var form = MultipartFormData()
        try form.append(fileAt: file, name: "blob")
        let task = api.uploadTask(.post, "echo", body: .multipart(form))
        var last: TransferProgress?
        for await progress in task.uploadProgress { last = progress }
        let echo = try await task.value
        #expect(echo["bodyLength"] == .int(Int(form.contentLength)))
        #expect(echo["chunked"] == false)
        #expect(last == TransferProgress(completedBytes: form.contentLength, totalBytes: form.contentLength))
    }

    @Test func aStreamPartOfKnownLength() async throws {
        let api = try await httpbinManager()
        let stream = [Data("stre".utf8), Data("amed".utf8)].async
        var form = MultipartFormData()
        form.append(stream: stream, length: 8, name: "s", fileName: "s.txt")
        let reply = try await api.uploadTask(.post, "post", body: .multipart(form)).value
        #expect(reply["files"]["s"] == "streamed")
    }

    @Test func aStreamPartShorterThanDeclaredFails() async throws {
        let api = try await faultManager()
        let stream = [Data("short".utf8)].async
        var form = MultipartFormData()
        form.append(stream: stream, length: 100, name: "s")
        let error = await capturedError { _ = try await api.uploadTask(.post, "echo", body: .multipart(form)).value }
        #expect(isCourierError(error!) { if case .serializationFailed = $0 { true } else { false } })
    }
}
