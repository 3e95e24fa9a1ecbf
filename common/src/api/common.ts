/**
 * Kubernetes types pglog's resources embed, reduced to the fields pglog reads or writes.
 * Their schemas in crds/ are the Kubernetes ones (the generator maps these names to them).
 */

/** Object metadata, as in Kubernetes' `metav1.ObjectMeta`. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A condition, as Kubernetes' `metav1.Condition`. */
export interface Condition {
  /**
   * CamelCase type: `Ready`, `Progressing`, `Degraded`, `Connected`.
   * @minLength 1
   * @maxLength 316
   */
  type: string;
  /**
   * Whether the condition holds: `True`, `False` or `Unknown`.
   * @enum True False Unknown
   */
  status: 'True' | 'False' | 'Unknown';
  /** The `metadata.generation` the condition was set for. */
  observedGeneration?: number;
  /** When the status last changed (RFC 3339). */
  lastTransitionTime: string;
  /** CamelCase reason; for errors, the stable error code. */
  reason: string;
  /** Human-readable details. */
  message: string;
}

/** A label selector, as Kubernetes' `metav1.LabelSelector`. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export interface LabelSelectorRequirement {
  key: string;
  /** @enum In NotIn Exists DoesNotExist */
  operator: string;
  values?: string[];
}

/** A key of a Secret in the same namespace. */
export interface SecretKeySelector {
  /**
   * Name of the Secret (a DNS-1123 subdomain).
   * @pattern ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
   * @maxLength 253
   */
  name: string;
  /**
   * Key within the Secret.
   * @pattern ^[-._a-zA-Z0-9]+$
   * @maxLength 253
   */
  key: string;
}

/** Container resources, as Kubernetes' `core/v1.ResourceRequirements` (quantities as strings). */
export interface ResourceRequirements {
  limits?: Record<string, string>;
  requests?: Record<string, string>;
}
