/// Media types for common file name extensions, for multipart file parts and file uploads.
package enum MIMEType {
    static let byExtension: [String: String] = [
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
        "html": "text/html", "htm": "text/html", "css": "text/css", "csv": "text/csv",
        "tsv": "text/tab-separated-values",
        "xml": "application/xml", "json": "application/json", "js": "text/javascript", "mjs": "text/javascript",
        "yaml": "application/yaml", "yml": "application/yaml", "toml": "application/toml",
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "bmp": "image/bmp", "tif": "image/tiff",
        "tiff": "image/tiff", "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon",
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav", "ogg": "audio/ogg",
        "oga": "audio/ogg", "flac": "audio/flac", "opus": "audio/opus",
        "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "webm": "video/webm",
        "mkv": "video/x-matroska",
        "avi": "video/x-msvideo", "mpeg": "video/mpeg", "ogv": "video/ogg",
        "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip",
        "tar": "application/x-tar", "bz2": "application/x-bzip2", "xz": "application/x-xz",
        "7z": "application/x-7z-compressed",
        "rar": "application/vnd.rar", "zst": "application/zstd", "iso": "application/x-iso9660-image",
        "doc": "application/msword", "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel", "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt": "application/vnd.oasis.opendocument.text", "ods": "application/vnd.oasis.opendocument.spreadsheet",
        "rtf": "application/rtf", "epub": "application/epub+zip", "wasm": "application/wasm",
        "woff": "font/woff", "woff2": "font/woff2", "ttf": "font/ttf", "otf": "font/otf",
        "bin": "application/octet-stream", "dmg": "application/x-apple-diskimage",
        "apk": "application/vnd.android.package-archive",
    ]

    /// The type for `fileName`'s extension; `application/octet-stream` when unknown.
    package static func forFileName(_ fileName: String) -> String {
        guard let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex else {
            return "application/octet-stream"
        }
        let ext = fileName[fileName.index(after: dot)...].lowercased()
        return byExtension[ext] ?? "application/octet-stream"
    }
}
