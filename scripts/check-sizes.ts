// Keeps files and functions short (STYLE.md, "short functions"): no file of the server (src/),
// of the console (console/src/, TSX included) or of the benchmarks (bench/) over MAX_FILE_LINES
// lines, no function over MAX_FUNCTION_LINES. Run by `npm run lint`.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;
/** The folders checked, from the repository's root. */
const ROOTS = ['src', 'console/src', 'bench'];

function* sourceFiles(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* sourceFiles(p);
    else if (/\.tsx?$/.test(e.name)) yield p;
  }
}

function isFunction(n: ts.Node): n is ts.FunctionLikeDeclaration {
  return (
    ts.isFunctionDeclaration(n) ||
    ts.isMethodDeclaration(n) ||
    ts.isArrowFunction(n) ||
    ts.isFunctionExpression(n) ||
    ts.isConstructorDeclaration(n) ||
    ts.isGetAccessorDeclaration(n) ||
    ts.isSetAccessorDeclaration(n)
  );
}

function nameOf(n: ts.FunctionLikeDeclaration, sf: ts.SourceFile): string {
  if (n.name) return n.name.getText(sf);
  const p = n.parent;
  if (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p))
    return p.name.getText(sf);
  return '(anonymous)';
}

function problems(path: string, root: string): string[] {
  const text = readFileSync(path, 'utf8');
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const rel = relative(root, path);
  const out: string[] = [];
  const lines = sf.getLineAndCharacterOfPosition(text.length).line + (text.endsWith('\n') ? 0 : 1);
  if (lines > MAX_FILE_LINES) out.push(`${rel}: ${lines} lines (at most ${MAX_FILE_LINES})`);
  const visit = (n: ts.Node): void => {
    if (isFunction(n) && n.body) {
      const start = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
      if (end - start + 1 > MAX_FUNCTION_LINES)
        out.push(
          `${rel}:${start + 1}: function ${nameOf(n, sf)} has ${end - start + 1} lines (at most ${MAX_FUNCTION_LINES})`,
        );
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

const root = process.cwd();
const found = ROOTS.flatMap((dir) => [...sourceFiles(join(root, dir))]).flatMap((p) => problems(p, root));
for (const line of found) console.error(line);
if (found.length > 0) process.exit(1);
console.log(`sizes: every file and function in ${ROOTS.join(', ')} is within its limit`);
