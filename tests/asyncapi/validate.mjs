// Parses and validates an AsyncAPI document with the official parser, resolving its `$ref`s
// to the files beside it, and prints every diagnostic. Exits 1 when the document does not
// parse or any diagnostic is an error or a warning, 2 on bad usage.
//
//   node tests/asyncapi/validate.mjs schemas/asyncapi.yaml
import path from "node:path";
import process from "node:process";

import { Parser, fromFile } from "@asyncapi/parser";

// Severities as the parser reports them (those of the Language Server Protocol).
const SEVERITY = ["error", "warning", "information", "hint"];
const FAILING = new Set([0, 1]);

const [file] = process.argv.slice(2);
if (!file) {
  console.error("usage: node validate.mjs <asyncapi.yaml>");
  process.exit(2);
}
const absolute = path.resolve(file);

const parser = new Parser();
const { document, diagnostics } = await fromFile(parser, absolute).parse({
  validateOptions: { allowedSeverity: { error: false, warning: true, info: true, hint: true } },
});

for (const diagnostic of diagnostics) {
  const where = diagnostic.path.length ? diagnostic.path.join("/") : "(document)";
  const line = diagnostic.range ? `:${diagnostic.range.start.line + 1}` : "";
  const severity = SEVERITY[diagnostic.severity] ?? `severity ${diagnostic.severity}`;
  console.log(`${file}${line}: ${severity} ${diagnostic.code}: ${diagnostic.message} (at ${where})`);
}

const failing = diagnostics.filter((diagnostic) => FAILING.has(diagnostic.severity));
if (document === undefined || failing.length > 0) {
  console.error(
    `${file}: invalid (${failing.length} error(s) or warning(s)${document === undefined ? ", not parsed" : ""})`,
  );
  process.exit(1);
}

const channels = document.channels().all().map((channel) => channel.address());
const operations = document.operations().all().length;
const messages = document.components().messages().all().length;
console.log(
  `${file}: valid AsyncAPI ${document.version()}: ${channels.length} channels (${channels.join(", ")}), ${operations} operations, ${messages} messages`,
);
