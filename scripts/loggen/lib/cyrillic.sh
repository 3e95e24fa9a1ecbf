# shellcheck shell=bash
# loggen, sourced by generate.sh: the Cyrillic databases' content, and the sessions that create
# and use it (written with session/ok/err from lib/sessions.sh).

# ---------------------------------------------------------------------------------------------
# The Cyrillic content (UTF-8 here; the server stores and logs it in each database's encoding)
# ---------------------------------------------------------------------------------------------
CYR_DBS=(cyr_utf8 cyr_win1251 cyr_koi8r)
declare -gA DB_ENCODING=([postgres]=UTF8 [bench]=UTF8 [cyr_utf8]=UTF8 [cyr_win1251]=WIN1251 [cyr_koi8r]=KOI8R)
CYR_IDENTIFIERS=("клиенты" "ид" "имя" "город" "баланс" "заказы" "номер" "клиент" "сумма" "комментарий"
  "клиенты_имя_уник" "заказы_по_клиенту" "несуществующая_таблица")
CYR_LITERALS=("Иван Петров" "Мария Сидорова" "Пётр Ёжиков" "Москва" "Санкт-Петербург" "Ёлкино"
  "Клиент-" "Город-" "Первый заказ" "Заказ через pgbench"
  "Ошибка проверки баланса: клиент %" "Баланс клиента отрицательный" "Пополните счёт")
# Messages the server produces from the statements above (to check decoding of error text).
CYR_MESSAGES=("Ошибка проверки баланса: клиент Пётр Ёжиков" "Баланс клиента отрицательный" "Пополните счёт")

cyr_setup_session() {
  local db=$1
  session "setup_$db" "$db" app loggen_setup
  ok 'CREATE TABLE "клиенты" ("ид" serial PRIMARY KEY, "имя" text NOT NULL, "город" text, "баланс" numeric(12,2) NOT NULL DEFAULT 0, CONSTRAINT "клиенты_имя_уник" UNIQUE ("имя"));'
  ok 'CREATE TABLE "заказы" ("номер" bigserial PRIMARY KEY, "клиент" text NOT NULL, "сумма" integer NOT NULL, "комментарий" text) WITH (autovacuum_enabled = off);'
  ok 'CREATE INDEX "заказы_по_клиенту" ON "заказы" ("клиент");'
  ok "INSERT INTO \"клиенты\" (\"имя\", \"город\", \"баланс\") VALUES ('Иван Петров', 'Москва', 100.50), ('Мария Сидорова', 'Санкт-Петербург', 250), ('Пётр Ёжиков', 'Ёлкино', 0);"
  ok "INSERT INTO \"клиенты\" (\"имя\", \"город\") SELECT 'Клиент-' || g, 'Город-' || g FROM generate_series(1, 300) AS g;"
  ok "INSERT INTO \"заказы\" (\"клиент\", \"сумма\", \"комментарий\") VALUES ('Иван Петров', 100, 'Первый заказ');"
}

cyr_load_session() {
  local db=$1
  session "load_$db" "$db" app "psql_cyr"
  ok "SELECT \"имя\", \"баланс\" FROM \"клиенты\" WHERE \"город\" = 'Москва';"
  ok "UPDATE \"клиенты\" SET \"баланс\" = \"баланс\" + 10 WHERE \"имя\" = 'Мария Сидорова';"
  ok 'UPDATE "клиенты" SET "баланс" = "баланс" + 1;'
  ok 'UPDATE "клиенты" SET "баланс" = "баланс" + 1;'
  ok 'UPDATE "клиенты" SET "баланс" = "баланс" - 2;'
  err 23505 "INSERT INTO \"клиенты\" (\"имя\", \"город\") VALUES ('Иван Петров', 'Москва');"
  err P0001 "DO \$\$ BEGIN RAISE EXCEPTION 'Ошибка проверки баланса: клиент %', 'Пётр Ёжиков' USING DETAIL = 'Баланс клиента отрицательный', HINT = 'Пополните счёт'; END \$\$;"
  err 42P01 'SELECT * FROM "несуществующая_таблица";'
  ok "SELECT count(*) FROM \"заказы\" WHERE \"клиент\" = 'Иван Петров';"
}
