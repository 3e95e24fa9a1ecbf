/** The OpenAPI v3 schema subset a CustomResourceDefinition accepts (`JSONSchemaProps`), as pglog uses it. */

export interface ValidationRule {
  /** A CEL expression over `self`. */
  readonly rule: string;
  /** What the API server answers when the rule is false. */
  readonly message: string;
}

export interface JsonSchema {
  description?: string;
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  default?: unknown;
  enum?: string[];
  minimum?: number;
  maximum?: number;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: JsonSchema;
  anyOf?: JsonSchema[];
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'map' | 'set';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: 'atomic' | 'granular';
  'x-kubernetes-validations'?: ValidationRule[];
}

/** Key order in the generated YAML: what a reader looks for first comes first. */
const KEY_ORDER: readonly (keyof JsonSchema)[] = [
  'description',
  'type',
  'default',
  'enum',
  'minimum',
  'maximum',
  'pattern',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'anyOf',
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'items',
  'additionalProperties',
  'properties',
  'required',
  'x-kubernetes-validations',
];

/** The same schema with its keys (and those of nested schemas) in KEY_ORDER. */
export function orderSchema(schema: JsonSchema): JsonSchema {
  const out: Record<string, unknown> = {};
  for (const key of KEY_ORDER) {
    const value = schema[key];
    if (value === undefined) continue;
    if (key === 'items' || key === 'additionalProperties') out[key] = orderSchema(value as JsonSchema);
    else if (key === 'anyOf') out[key] = (value as JsonSchema[]).map(orderSchema);
    else if (key === 'properties') {
      out[key] = Object.fromEntries(Object.entries(value as Record<string, JsonSchema>).map(([k, v]) => [k, orderSchema(v)]));
    } else out[key] = value;
  }
  const unknown = Object.keys(schema).filter((k) => !(KEY_ORDER as readonly string[]).includes(k));
  if (unknown.length > 0) throw new Error(`schema key(s) ${unknown.join(', ')} missing from KEY_ORDER in json-schema.ts`);
  return out;
}
