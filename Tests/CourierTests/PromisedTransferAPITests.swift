import Courier
import Foundation
import Testing

// The transfer calls of the public API as first promised to users, copied as written (they
// must compile). The behaviours are tested one by one in DownloadTests, UploadTests,
// MultipartTests and ByteStreamTests.

struct LineParser {
    var bytes = 0
    mutating func feed(_ chunk: Data) { bytes += chunk.count }
}

func specTransferExample(
    api: HTTPSessionManager, destinationURL: URL, sourceURL: URL, photoURL: URL, thumbnail: Data
) async throws {
    var parser = LineParser()

    // Downloads straight to disk, resumable.
    let download = api.downloadTask("files/big.iso", to: destinationURL)
    let resumeData = await download.cancel(producingResumeData: true)
    let resumed = api.downloadTask(resumingFrom: resumeData!, to: destinationURL)
    let file: URL = try await resumed.value

    // Uploads from a file or a stream, and multipart forms streamed from disk.
    let upload = api.uploadTask(.put, "files/big.iso", fromFile: sourceURL)
    for await progress in upload.uploadProgress { print(progress.completedBytes) }
    let reply: JSON = try await api.POST("upload", parameters: ["title": "Holiday"]) { form in
        try form.append(fileAt: photoURL, name: "photo")  // mime type from the extension
        form.append(thumbnail, name: "thumb", fileName: "t.jpg", mimeType: "image/jpeg")
    }

    // A response body as a backpressured stream of bytes.
    for try await chunk in api.bytes(.get, "stream/100") { parser.feed(chunk) }

    _ = (file, reply, parser)
}
