"""Type-checks every Swift block of the guide, so that the guide cannot rot.

The blocks of README.md and the DocC articles (Sources/*/*.docc) are each compiled as the
`main.swift` of a program of their own, against the modules the last `swift build` made, beside a prelude that declares the names a
reader assumes: the earlier blocks of the same page that only declare things (the API client a
page builds up), and the names of scripts/guidelib/prelude.swift (`api`, `User`, `url`, a `show`
function...). A name the block declares itself is left out of the prelude. A block with
imports of its own gets only those (and Foundation), so a block that forgets an import fails
as it would for a reader; one without gets `import Courier` and `import CourierTesting`.
Warnings fail too (a result the text says may be discarded must be discardable), but for a
value shown without being used (`response.status  // the status`). Package manifests are
checked against PackageDescription.

Documentation/Usage.md and Documentation/AdvancedUsage.md are left out: scripts/guide makes them
from the Courier catalog's articles, blocks unchanged, so the articles' check covers them (and
`scripts/guide --check` that they are what the articles make). Given as FILE, they are checked.

Usage: scripts/guide --compile [--bin-path DIR] [FILE...]
  DIR: the build's products (default: `swift build --show-bin-path`).
Exit status 1 when a block does not compile; each failure is printed with its file and line.
"""

import concurrent.futures
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PRELUDE = ROOT / "scripts" / "guidelib" / "prelude.swift"

BLOCK = re.compile(r"^```swift[ \t]*\n(.*?)^```", re.M | re.S)
DECLARATION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|fileprivate|internal|final|open|nonisolated)\s+)*"
    r"(?:let|var|struct|class|enum|actor|protocol|func|typealias)\s+([A-Za-z_]\w*)",
    re.M,
)
TUPLE = re.compile(r"^(?:let|var)\s+\(([^)]*)\)", re.M)


def guide_files() -> list[pathlib.Path]:
    """README.md and the DocC articles; not the files scripts/guide generates from the articles."""
    files = [ROOT / "README.md"] + sorted(ROOT.glob("Sources/*/*.docc/**/*.md"))
    return [f for f in files if f.exists()]


def blocks(path: pathlib.Path):
    text = path.read_text()
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 2
        yield line, match.group(1)


def prelude_entries() -> list[tuple[str, str]]:
    """The prelude's declarations, each with the name it declares (an entry starts at a line
    `// name: NAME`)."""
    entries = []
    name, lines = None, []
    for line in PRELUDE.read_text().splitlines():
        found = re.match(r"^// name: (\w+)$", line)
        if found:
            if name:
                entries.append((name, "\n".join(lines)))
            name, lines = found.group(1), []
        elif name:
            lines.append(line)
    if name:
        entries.append((name, "\n".join(lines)))
    return entries


def declared_names(code: str) -> set[str]:
    names = set(DECLARATION.findall(code))
    for group in TUPLE.findall(code):
        names.update(part.strip().split(":")[0].strip() for part in group.split(","))
    return names


DECLARES = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|private|fileprivate|internal|final|open|nonisolated(?:\(unsafe\))?)\s+)*"
    r"(?:let|var|struct|class|enum|actor|protocol|func|typealias|extension|import)\b")


def declarations_only(code: str) -> bool:
    """Whether every top-level line of `code` declares something (or closes a declaration):
    such a block can stand in another file, as a later block's context."""
    for line in code.splitlines():
        if not line.strip() or line.startswith((" ", "\t", "//", "}", ")", "]")):
            continue
        if not DECLARES.match(line) or re.search(r"\b(try|await)\b", line):
            return False
    return True


def is_manifest(code: str) -> bool:
    return "import PackageDescription" in code or re.match(r"^\s*\.(target|testTarget|executableTarget)\(", code) is not None


def flags(bin_path: pathlib.Path) -> list[str]:
    """The build's Swift modules, and the C modules under them: the module maps SwiftPM wrote for
    the C targets, their headers, and the system libraries' module maps."""
    result = ["-swift-version", "6", "-I", str(bin_path / "Modules")]
    for module_map in sorted(bin_path.glob("*.build/module.modulemap")):
        result += ["-Xcc", f"-fmodule-map-file={module_map}"]
    for include in sorted(ROOT.glob("Sources/*/include")):
        result += ["-Xcc", "-I", "-Xcc", str(include)]
    for module_map in sorted(ROOT.glob("Sources/*/module.modulemap")):
        result += ["-Xcc", f"-fmodule-map-file={module_map}"]
    return result


def manifest_flags() -> list[str]:
    swift = pathlib.Path(subprocess.run(["which", "swift"], capture_output=True, text=True).stdout.strip())
    api = swift.resolve().parent.parent / "lib" / "swift" / "pm" / "ManifestAPI"
    return ["-I", str(api), "-package-description-version", "6.1"]


def problems(stderr: str) -> list[str]:
    """The errors, and the warnings but for a value the guide shows without using it (a
    property listed with a comment); an unused result of a call is one."""
    found = []
    for line in stderr.splitlines():
        if "error:" in line:
            found.append(line)
        elif "warning:" in line and ("[#no-usage]" not in line or "result of call" in line):
            found.append(line)
    return found


def without_app_imports(code: str, modules: set[str]) -> str:
    """`code` without imports of the reader's own app module (`@testable import WeatherApp`):
    what the page declares of it is the block's context."""
    lines = []
    for text in code.splitlines():
        imported = re.match(r"^@testable import (\w+)$", text)
        lines.append("" if imported and imported.group(1) not in modules else text)
    return "\n".join(lines)


def as_manifest(code: str) -> str:
    """A block that is a piece of a manifest (a target to add to `targets:`) inside a whole
    one; a whole manifest as it is."""
    if re.match(r"^\s*\.(target|testTarget|executableTarget)\(", code):
        return "// swift-tools-version: 6.1\nimport PackageDescription\n\nlet package = Package(\n" \
            '    name: "App",\n    targets: [\n' + code + "\n    ]\n)\n"
    return code


def check(job) -> str | None:
    path, line, code, context, bin_path, entries, directory = job
    work = pathlib.Path(directory) / f"{path.stem}-{line}"
    work.mkdir(parents=True, exist_ok=True)
    where = f"{path.relative_to(ROOT)}:{line}"
    if is_manifest(code):
        (work / "Package.swift").write_text(as_manifest(code))
        result = subprocess.run(
            ["swiftc", "-typecheck", *manifest_flags(), str(work / "Package.swift")], capture_output=True, text=True)
        found = problems(result.stderr) if result.returncode == 0 else problems(result.stderr) or [result.stderr]
        return f"{where}: the manifest does not compile:\n    " + "\n    ".join(found[:8]) if found else None
    modules = {m.stem for m in (bin_path / "Modules").glob("*.swiftmodule")}
    code = without_app_imports(code, modules)
    own = declared_names(code)
    has_imports = any(re.match(r"^(@\w+(\(\w+\))?\s+)?import \w+", l) for l in code.splitlines())
    header = "import Foundation\n" + ("" if has_imports else "import Courier\nimport CourierTesting\n")
    (work / "main.swift").write_text(header + code)
    # The context: earlier blocks of the same page that only declare (the API client a page
    # builds), then the prelude's names, each unless the block declares it itself.
    taken = set(own)
    parts = []
    for earlier in context:
        earlier = without_app_imports(earlier, modules)
        names = declared_names(earlier)
        if names & taken:
            continue
        taken |= names
        parts.append(earlier)
    # The prelude's names that the block (or its context, or another entry taken) uses.
    wanted = set(re.findall(r"\b\w+\b", code + "\n".join(parts)))
    chosen = set()
    while True:
        more = {name for name, body in entries if name in wanted and name not in taken and name not in chosen}
        if not more:
            break
        chosen |= more
        for name, body in entries:
            if name in more:
                wanted |= set(re.findall(r"\b\w+\b", body))
    parts += [body for name, body in entries if name in chosen]
    imports = sorted({l for part in parts for l in part.splitlines() if l.startswith("import ")})
    bodies = ["\n".join(l for l in part.splitlines() if not l.startswith("import ")) for part in parts]
    prelude = "import Courier\nimport CourierTesting\nimport Foundation\nimport Logging\nimport Metrics\n"
    prelude += "import OpenAPIRuntime\nimport Tracing\n" + "\n".join(imports) + "\n\n"
    (work / "prelude.swift").write_text(prelude + "\n\n".join(bodies))
    result = subprocess.run(
        ["swiftc", "-typecheck", *flags(bin_path), str(work / "main.swift"), str(work / "prelude.swift")],
        capture_output=True, text=True)
    found = problems(result.stderr)
    if result.returncode == 0 and not found:
        return None
    return f"{where}: the block does not compile:\n    " + "\n    ".join((found or [result.stderr])[:8])


def linked_pages(page: pathlib.Path, seen: set[pathlib.Path]):
    """The pages of the same catalog that `page` links to (`<doc:Name>`, `<doc:Name#Section>`),
    and the pages they link to, each once: the pages a page builds on before it."""
    for name in re.findall(r"<doc:(\w+)(?:#[^>]*)?>", page.read_text()):
        linked = page.parent / f"{name}.md"
        if linked.exists() and linked not in seen:
            seen.add(linked)
            yield from linked_pages(linked, seen)
            yield linked


def main(args: list[str]) -> int:
    bin_path = None
    if args[:1] == ["--bin-path"]:
        bin_path, args = pathlib.Path(args[1]), args[2:]
    if bin_path is None:
        bin_path = pathlib.Path(
            subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.strip())
    files = [pathlib.Path(a).resolve() for a in args] or guide_files()
    entries = prelude_entries()
    with tempfile.TemporaryDirectory(prefix="courier-guide-") as directory:
        jobs = []
        for f in files:
            # A page that builds on another (`<doc:APIClientSubclass>`, in the same catalog)
            # has that page's declarations as its context too, and those of the pages that one
            # builds on.
            context = []
            for page in linked_pages(f, {f}):
                context += [code for _, code in blocks(page) if declarations_only(code) and not is_manifest(code)]
            for line, code in blocks(f):
                jobs.append((f, line, code, list(context), bin_path, entries, directory))
                if declarations_only(code) and not is_manifest(code):
                    context.append(code)
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            failures = [f for f in pool.map(check, jobs) if f]
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"scripts/guide --compile: {len(jobs) - len(failures)} of {len(jobs)} Swift blocks compile")
    return 1 if failures else 0

