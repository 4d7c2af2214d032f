import CourierCore
import Foundation

// MARK: The partial file

extension ResumeData {
    /// A new name for the partial file of a download to `destination`, of the one form resume
    /// data is accepted with: `.<destination name>.<8 hex digits>.download`, in the
    /// destination's directory. Nothing is created.
    ///
    /// Use it to hand Courier a partial file made some other way (for example a file that an
    /// earlier tool left half downloaded): move it to this name, then resume with
    /// `ResumeData` naming it.
    public static func newPartialFile(for destination: URL) -> URL {
        partialFile(
            named: destination.lastPathComponent, in: destination.deletingLastPathComponent().standardizedFileURL)
    }

    /// A new partial-file name for a download whose file will be called `name` (`download`
    /// when the name comes from the response) in `directory`.
    static func partialFile(named name: String, in directory: URL) -> URL {
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 16, uppercase: true)
        let padded = String(repeating: "0", count: 8 - tag.count) + tag
        return directory.appendingPathComponent(".\(name).\(padded).download")
    }

    /// The names a partial file for a download to `destination` may have been made for: the
    /// destination's own name and, for a file destination, `download` (the placeholder of a
    /// download into the directory, whose resume data may finish it under any name).
    static func partialFileNames(
        for destination: HTTPSessionManager.DownloadDestination
    ) -> [String] {
        switch destination {
        case .file(let url): [url.lastPathComponent, "download"]
        case .directory: ["download"]
        }
    }

    /// Why `file` cannot be the partial file of a download into `directory` under one of
    /// `names`; nil when its path is of Courier's form: a file URL without `.` or `..`
    /// components, directly in `directory`, named `.<name>.<8 hex digits>.download`. Only the
    /// path is looked at.
    static func partialFileProblem(_ file: URL, directory: URL, names: [String]) -> String? {
        guard file.isFileURL else { return "\(file.absoluteString) is not a file URL" }
        let path = file.path
        guard path.hasPrefix("/") else { return "the partial file \(path) is not an absolute path" }
        guard !file.pathComponents.contains(where: { $0 == ".." || $0 == "." }) else {
            return "the partial file \(path) has a `.` or `..` component"
        }
        let parent = file.deletingLastPathComponent().standardizedFileURL.path
        guard parent == directory.standardizedFileURL.path else {
            return "the partial file \(path) is not in the destination's directory \(directory.path)"
        }
        guard names.contains(where: { isPartialFileName(file.lastPathComponent, for: $0) }) else {
            return "\(path) is not a partial file Courier makes for this destination "
                + "(.\(names[0]).<8 hex digits>.download next to it)"
        }
        return nil
    }

    private static let hexDigits = Set("0123456789ABCDEFabcdef".utf8)

    /// Whether `fileName` is `.<name>.<8 hex digits>.download`.
    static func isPartialFileName(_ fileName: String, for name: String) -> Bool {
        let prefix = ".\(name)."
        let suffix = ".download"
        guard !name.isEmpty, fileName.hasPrefix(prefix), fileName.hasSuffix(suffix),
            fileName.utf8.count == prefix.utf8.count + 8 + suffix.utf8.count
        else { return false }
        let tag = fileName.utf8.dropFirst(prefix.utf8.count).prefix(8)
        return tag.allSatisfy { hexDigits.contains($0) }
    }

    /// Opens the partial file to finish a download to `destination`, after checking that it is
    /// one Courier made there: see ``partialFileProblem(_:directory:names:)``; then opened
    /// without following a symbolic link, and only if it is a regular file with no other
    /// link. The offset is `bytesWritten` or the file's size, whichever is smaller. Throws
    /// `fileSystem` ("Cannot resume the download: ...") otherwise, having changed nothing.
    func openPartialFile(
        for destination: HTTPSessionManager.DownloadDestination
    ) throws(CourierError)
        -> OpenedPartialFile
    {
        func refuse(_ reason: String) -> CourierError {
            .fileSystem(.init(url: partialFile, message: "Cannot resume the download: \(reason)"))
        }
        guard bytesWritten >= 0 else { throw refuse("bytesWritten is \(bytesWritten)") }
        if let problem = Self.partialFileProblem(
            partialFile, directory: destination.directory, names: Self.partialFileNames(for: destination))
        {
            throw refuse(problem)
        }
        let path = partialFile.path
        // O_NONBLOCK: a FIFO put in its place must not hang the open.
        let descriptor = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP { throw refuse("\(path) is a symbolic link") }
            throw refuse("cannot open \(path): \(String(cString: strerror(code)))")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw refuse("cannot read the size of \(path): \(reason)")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw refuse("\(path) is not a regular file")
        }
        guard status.st_nlink == 1 else {
            close(descriptor)
            throw refuse("\(path) has other hard links")
        }
        let flags = fcntl(descriptor, F_GETFL)
        if flags >= 0 { _ = fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) }
        return OpenedPartialFile(
            file: partialFile, descriptor: descriptor, offset: min(bytesWritten, Int64(status.st_size)))
    }
}
