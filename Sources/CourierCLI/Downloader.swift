import ArgumentParser
import Courier
import Foundation

/// `courier --download`: a file download with a progress bar, resumable with `--continue`.
///
/// When a download stops part way (Ctrl-C, a lost connection), the partial file stays next to
/// the output and its resume data goes to `<output>.courier-resume`; `--continue` picks it up
/// and fetches only the rest. Without that file, `--continue` resumes from the size of an
/// existing output file (as `curl -C -` does).
struct Downloader {
    let api: HTTPSessionManager
    let invocation: Invocation
    let output: String?
    let resumes: Bool

    func run() async throws {
        guard invocation.method == .get, case .none = invocation.body else {
            throw ValidationError("--download sends a GET without body")
        }
        let destination = URL(fileURLWithPath: output ?? Self.defaultName(for: invocation.url))
        let resumeFile = URL(fileURLWithPath: destination.path + ".courier-resume")
        let (task, adopted) = makeTask(destination: destination, resumeFile: resumeFile)
        let display = ProgressDisplay()

        // Ctrl-C keeps what was downloaded.
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT)
        interrupt.setEventHandler {
            Task {
                let resumeData = await task.cancel(producingResumeData: true)
                display.finish(verb: "interrupted")
                Self.save(resumeData, to: resumeFile)
                Foundation.exit(130)
            }
        }
        interrupt.resume()

        let watcher = Task {
            for await progress in task.downloadProgress { display.show(progress, verb: "downloaded") }
        }
        do {
            let file = try await task.value
            await watcher.value
            display.finish()
            try? FileManager.default.removeItem(at: resumeFile)
            FileHandle.standardError.write(Data("saved \(file.path)\n".utf8))
        } catch let error as CourierError {
            display.finish(verb: "stopped at")
            Self.save(error.context.resumeData, to: resumeFile)
            if let adopted, error.context.resumeData == nil, FileManager.default.fileExists(atPath: adopted.path) {
                rename(adopted.path, destination.path)  // the output file the user had stays theirs
            }
            FileHandle.standardError.write(Data("courier: \(error)\n".utf8))
            throw ExitCode(CourierCommand.exitCode(for: error))
        }
    }

    /// The download, and the partial file an existing output file became (for `--continue`
    /// without resume data), to be put back if the download fails without resume data.
    private func makeTask(destination: URL, resumeFile: URL) -> (DownloadTask, adopted: URL?) {
        let options: DownloadOptions = [.replaceExisting, .createIntermediateDirectories]
        if resumes {
            if let data = try? Data(contentsOf: resumeFile), let resumeData = try? ResumeData(data: data),
                FileManager.default.fileExists(atPath: resumeData.partialFile.path)
            {
                return (api.downloadTask(resumingFrom: resumeData, to: destination, options: options), nil)
            }
            if let size = (try? FileManager.default.attributesOfItem(atPath: destination.path))?[.size] as? Int64,
                size > 0, let url = URL(string: invocation.url)
            {
                // Resume data may only name a partial file of Courier's form next to the
                // destination: the file that is there becomes one.
                let partial = ResumeData.newPartialFile(for: destination)
                if rename(destination.path, partial.path) == 0 {
                    let resumeData = ResumeData(
                        url: url, partialFile: partial, bytesWritten: size, validator: nil, headers: invocation.headers)
                    return (api.downloadTask(resumingFrom: resumeData, to: destination, options: options), partial)
                }
            }
        }
        return (
            api.downloadTask(
                invocation.url, headers: invocation.headers, requestOptions: invocation.options, to: destination,
                options: options), nil
        )
    }

    private static func save(_ resumeData: ResumeData?, to file: URL) {
        guard let resumeData else { return }
        try? resumeData.data.write(to: file, options: .atomic)
        FileHandle.standardError.write(
            Data(
                "kept \(resumeData.bytesWritten) bytes in \(resumeData.partialFile.path); resume with --continue\n".utf8
            ))
    }

    /// The URL's last path component, or `index.html`.
    static func defaultName(for url: String) -> String {
        let name = URL(string: url)?.lastPathComponent ?? ""
        return name.isEmpty || name == "/" ? "index.html" : name
    }
}
