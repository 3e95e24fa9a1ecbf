/**
 * TypeScript interface → OpenAPI v3 schema of a CustomResourceDefinition, through the
 * TypeScript compiler's type checker, so the CRDs in crds/ cannot drift from the types the code
 * uses.
 *
 * Mapping: `string`, `boolean`; `number` is `integer` unless tagged `@type number`; string
 * literal unions and `@enum a b c` are enums; arrays; `Record<string, V>` is an object with
 * `additionalProperties`; interfaces are objects whose non-optional fields are required
 * unless they have a `@default` (JSON) or `@optional` (filled in by the loader, not by the API
 * server). Other tags: `@minimum`, `@maximum`, `@pattern`, `@minLength`, `@maxLength`,
 * `@minItems`, `@maxItems`, `@listMapKey KEY` (a list keyed by KEY), `@validation RULE :: MESSAGE`
 * (a CEL rule, on a field or an interface), `@crdType NAME` (the field's form in the cluster,
 * an interface of the same file, where the TypeScript type is a union of forms). The doc
 * comment is the description; a field without one (on itself or on its interface) is an error.
 */
import ts from 'typescript';

import { type DocComment, parseDocComment } from './doc-comment.ts';
import type { JsonSchema, ValidationRule } from './json-schema.ts';

export interface SchemaOptions {
  /** Interfaces whose schema is given (Kubernetes' own types), by name. */
  readonly knownSchemas?: ReadonlyMap<string, JsonSchema>;
  /** Shown in error messages instead of absolute paths: file names relative to this directory. */
  readonly rootDir?: string;
}

const NUMERIC_TAGS = ['minimum', 'maximum', 'minLength', 'maxLength', 'minItems', 'maxItems'] as const;
const KNOWN_TAGS = new Set<string>([...NUMERIC_TAGS, 'default', 'enum', 'pattern', 'type', 'validation', 'listMapKey', 'optional', 'crdType']);

/** A type program over the given files (their imports are followed). */
export function createTypeProgram(files: readonly string[]): ts.Program {
  return ts.createProgram([...files], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    allowImportingTsExtensions: true,
    types: [],
  });
}

/** The node's doc comment, from its raw text (a comment after `{` on the same line counts too). */
function docOf(node: ts.Node): DocComment {
  const sf = node.getSourceFile();
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc);
  const last = docs[docs.length - 1];
  return parseDocComment(last === undefined ? undefined : sf.text.slice(last.pos, last.end));
}

function tagValues(doc: DocComment, name: string): string[] {
  return doc.tags.filter((t) => t.name === name).map((t) => t.text);
}

function tagValue(doc: DocComment, name: string): string | undefined {
  return tagValues(doc, name)[0];
}

export function parseValidation(text: string, where: string): ValidationRule {
  const at = text.indexOf(' :: ');
  if (at < 0) throw new Error(`${where}: @validation needs "RULE :: MESSAGE", got "${text}"`);
  return { rule: text.slice(0, at).trim(), message: text.slice(at + 4).trim() };
}

class SchemaBuilder {
  readonly checker: ts.TypeChecker;
  readonly options: SchemaOptions;

  constructor(program: ts.Program, options: SchemaOptions) {
    this.checker = program.getTypeChecker();
    this.options = options;
  }

  fileName(node: ts.Node): string {
    const name = node.getSourceFile().fileName;
    const root = this.options.rootDir;
    return root !== undefined && name.startsWith(`${root}/`) ? name.slice(root.length + 1) : name;
  }

  /** The interface declaration of an object type, when it has one. */
  interfaceOf(type: ts.Type): ts.InterfaceDeclaration | undefined {
    return (type.aliasSymbol ?? type.getSymbol())?.declarations?.find(ts.isInterfaceDeclaration);
  }

  /** Schema of an interface type; `path` names it in errors (`spec.instances[]`). */
  objectSchema(type: ts.Type, path: string, skip: ReadonlySet<string> = new Set()): JsonSchema {
    const properties: Record<string, JsonSchema> = {};
    const required: string[] = [];
    for (const prop of this.checker.getPropertiesOfType(type)) {
      if (skip.has(prop.name)) continue;
      const decl = prop.valueDeclaration ?? prop.declarations?.[0];
      if (decl === undefined) throw new Error(`${path}.${prop.name}: no declaration`);
      const { schema, isRequired } = this.fieldSchema(prop, decl, path === '' ? prop.name : `${path}.${prop.name}`);
      properties[prop.name] = schema;
      if (isRequired) required.push(prop.name);
    }
    const schema: JsonSchema = { type: 'object', properties };
    if (required.length > 0) schema.required = required;
    const iface = this.interfaceOf(type);
    if (iface !== undefined) {
      const rules = tagValues(docOf(iface), 'validation').map((t) => parseValidation(t, `${this.fileName(iface)}: interface ${iface.name.text}`));
      if (rules.length > 0) schema['x-kubernetes-validations'] = rules;
    }
    return schema;
  }

  fieldSchema(prop: ts.Symbol, decl: ts.Declaration, path: string): { schema: JsonSchema; isRequired: boolean } {
    const doc = docOf(decl);
    const owner = ts.isInterfaceDeclaration(decl.parent) ? decl.parent.name.text : '(type literal)';
    const where = `${path} (${owner}.${prop.name} in ${this.fileName(decl)})`;
    for (const tag of doc.tags) if (!KNOWN_TAGS.has(tag.name)) throw new Error(`${where}: unknown tag @${tag.name}`);
    let type = this.checker.getNonNullableType(this.checker.getTypeOfSymbol(prop));
    const crdType = tagValue(doc, 'crdType');
    if (crdType !== undefined) type = this.namedType(decl.getSourceFile(), crdType, where);
    const schema: JsonSchema = { ...this.typeSchema(type, doc, path, where) };
    const description = doc.description !== '' ? doc.description : this.typeDescription(type);
    if (description === '') {
      throw new Error(`${where}: no description; write a doc comment on the field (it is the CRD's description that kubectl explain shows)`);
    }
    this.applyTags(schema, doc, where);
    const optional = (prop.flags & ts.SymbolFlags.Optional) !== 0 || schema.default !== undefined || doc.tags.some((t) => t.name === 'optional');
    return { schema: { description, ...schema }, isRequired: !optional };
  }

  /** Doc comment of the interface a field's type names, if the field has none of its own. */
  typeDescription(type: ts.Type): string {
    const target = this.checker.isArrayType(type) ? this.checker.getTypeArguments(type as ts.TypeReference)[0] : type;
    const iface = target === undefined ? undefined : this.interfaceOf(target);
    return iface === undefined ? '' : docOf(iface).description;
  }

  namedType(sf: ts.SourceFile, name: string, where: string): ts.Type {
    const found = sf.statements.find(
      (s): s is ts.InterfaceDeclaration | ts.TypeAliasDeclaration => (ts.isInterfaceDeclaration(s) || ts.isTypeAliasDeclaration(s)) && s.name.text === name,
    );
    if (found === undefined) throw new Error(`${where}: @crdType ${name}: no interface or type ${name} in ${this.fileName(sf)}`);
    return this.checker.getTypeAtLocation(found.name);
  }

  typeSchema(type: ts.Type, doc: DocComment, path: string, where: string): JsonSchema {
    const known = this.options.knownSchemas?.get((type.aliasSymbol ?? type.getSymbol())?.name ?? '');
    if (known !== undefined) return structuredClone(known);
    if ((type.flags & ts.TypeFlags.BooleanLike) !== 0) return { type: 'boolean' };
    if ((type.flags & ts.TypeFlags.NumberLike) !== 0) {
      const declared = tagValue(doc, 'type') ?? 'integer';
      if (declared !== 'integer' && declared !== 'number') throw new Error(`${where}: @type ${declared}: only integer or number`);
      return { type: declared };
    }
    if ((type.flags & ts.TypeFlags.String) !== 0) return { type: 'string' };
    const literals = type.isUnion() ? type.types : [type];
    if (literals.every((t) => t.isStringLiteral())) return { type: 'string', enum: literals.map((t) => t.value) };
    if (this.checker.isArrayType(type)) {
      const element = this.checker.getTypeArguments(type as ts.TypeReference)[0];
      if (element === undefined) throw new Error(`${where}: array without element type`);
      return { type: 'array', items: this.typeSchema(element, { description: '', tags: [] }, `${path}[]`, `${where}[]`) };
    }
    if (type.isUnion()) {
      throw new Error(`${where}: union type ${this.checker.typeToString(type)} has no schema; tag the field @crdType with the form the cluster uses`);
    }
    if ((type.flags & ts.TypeFlags.Object) !== 0) {
      const index = this.checker.getIndexInfoOfType(type, ts.IndexKind.String);
      if (index !== undefined && type.getProperties().length === 0) {
        return { type: 'object', additionalProperties: this.typeSchema(index.type, { description: '', tags: [] }, `${path}.*`, `${where}.*`) };
      }
      return this.objectSchema(type, path);
    }
    throw new Error(`${where}: type ${this.checker.typeToString(type)} has no schema mapping`);
  }

  applyTags(schema: JsonSchema, doc: DocComment, where: string): void {
    for (const name of NUMERIC_TAGS) {
      const text = tagValue(doc, name);
      if (text === undefined) continue;
      const value = Number(text);
      if (text.trim() === '' || !Number.isFinite(value)) throw new Error(`${where}: @${name} ${text} is not a number`);
      schema[name] = value;
    }
    const pattern = tagValue(doc, 'pattern');
    if (pattern !== undefined) schema.pattern = pattern;
    const enumText = tagValue(doc, 'enum');
    if (enumText !== undefined) {
      const values = enumText.split(/\s+/).filter((v) => v !== '');
      if (schema.enum !== undefined && schema.enum.join(' ') !== values.join(' ')) {
        throw new Error(`${where}: @enum ${values.join(' ')} differs from the type's values ${schema.enum.join(' ')}`);
      }
      schema.enum = values;
    }
    const defaultText = tagValue(doc, 'default');
    if (defaultText !== undefined) {
      try {
        schema.default = JSON.parse(defaultText) as unknown;
      } catch {
        throw new Error(`${where}: @default ${defaultText} is not JSON (strings need double quotes)`);
      }
    }
    const listKeys = tagValues(doc, 'listMapKey');
    if (listKeys.length > 0) {
      if (schema.type !== 'array') throw new Error(`${where}: @listMapKey on a field that is not a list`);
      const itemProps = schema.items?.properties ?? {};
      for (const key of listKeys) {
        if (itemProps[key] === undefined) throw new Error(`${where}: @listMapKey ${key}: the list's items have no field ${key}`);
        if (!(schema.items?.required ?? []).includes(key) && itemProps[key].default === undefined) {
          throw new Error(`${where}: @listMapKey ${key}: the key must be required or have a default`);
        }
      }
      schema['x-kubernetes-list-type'] = 'map';
      schema['x-kubernetes-list-map-keys'] = listKeys;
    }
    const rules = tagValues(doc, 'validation').map((t) => parseValidation(t, where));
    if (rules.length > 0) schema['x-kubernetes-validations'] = [...(schema['x-kubernetes-validations'] ?? []), ...rules];
  }
}

/** A resource's root schema: `apiVersion`, `kind` and `metadata` as Kubernetes owns them, the rest from the interface. */
export function resourceSchema(program: ts.Program, fileName: string, interfaceName: string, options: SchemaOptions = {}): JsonSchema {
  const builder = new SchemaBuilder(program, options);
  const sf = program.getSourceFile(fileName);
  if (sf === undefined) throw new Error(`${fileName}: not in the program`);
  const iface = sf.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === interfaceName);
  if (iface === undefined) throw new Error(`${builder.fileName(sf)}: no interface ${interfaceName}`);
  const diagnostics = ts.getPreEmitDiagnostics(program, sf);
  if (diagnostics.length > 0) {
    throw new Error(`${builder.fileName(sf)} does not type-check: ${ts.flattenDiagnosticMessageText(diagnostics[0]?.messageText, '\n')}`);
  }
  // Kubernetes owns metadata (its schema is built in) and fills apiVersion and kind: they are
  // plain strings, never required, and metadata is not described again.
  const owned = new Set(['apiVersion', 'kind', 'metadata']);
  const schema = builder.objectSchema(builder.checker.getTypeAtLocation(iface.name), '', new Set(['metadata']));
  const props: Record<string, JsonSchema> = {};
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    props[name] = owned.has(name) ? { description: prop.description ?? '', type: 'string' } : prop;
    if (name === 'kind') props['metadata'] = { type: 'object' };
  }
  const required = (schema.required ?? []).filter((r) => !owned.has(r));
  const root: JsonSchema = { description: docOf(iface).description, type: 'object', properties: props };
  if (required.length > 0) root.required = required;
  if (schema['x-kubernetes-validations'] !== undefined) root['x-kubernetes-validations'] = schema['x-kubernetes-validations'];
  return root;
}
