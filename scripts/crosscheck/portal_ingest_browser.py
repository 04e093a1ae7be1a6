"""Drives the portal's ingest pages in headless chromium.

Usage: portal_ingest_browser.py BASE_URL CHROMIUM CHROMEDRIVER ADMIN_TOKEN DASHBOARD_URL
                                SOURCE_NAME EVENT_TYPE REJECT_REASON

Run by crates/hookd/tests/ingest.rs against a real `hookd serve` with one source that accepted
one request of EVENT_TYPE and refused one for REJECT_REASON. The source's portal link
(DASHBOARD_URL) opens the source's page; an admin finds it under Sources with its URL.
"""
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

(BASE, CHROMIUM, DRIVER, ADMIN_TOKEN, DASHBOARD, NAME, EVENT_TYPE, REASON) = sys.argv[1:9]

options = Options()
options.binary_location = CHROMIUM
for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
    options.add_argument(arg)
driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
wait = WebDriverWait(driver, 30)


def body_text():
    return driver.find_element(By.TAG_NAME, "body").text


def check(condition, message):
    if not condition:
        raise AssertionError(f"{message}\n--- page ---\n{body_text()}")
    print(f"ok  {message}")


def heading(text):
    wait.until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), text))


def table_text(caption_start):
    caption = wait.until(EC.presence_of_element_located(
        (By.XPATH, f"//caption[starts-with(normalize-space(.), '{caption_start}')]")))
    return caption.find_element(By.XPATH, "./..").text


try:
    # The source's portal link: an app-scoped token whose home is the source's page.
    driver.get(DASHBOARD)
    heading("Ingest source")
    accepted = table_text("Requests this source accepted")
    check(EVENT_TYPE in accepted, "the link opens the source: its accepted request")
    refused = table_text("Requests this source refused")
    check(REASON in refused, "and the request it refused, with the reason")
    check("Sources" not in driver.find_element(By.ID, "nav").text.split("\n"),
          "no Sources link for a customer")
    link = driver.find_element(
        By.XPATH, "//caption[starts-with(., 'Requests this source accepted')]/..//tbody//a")
    link.click()
    heading("Message")
    check(EVENT_TYPE in body_text(), "an accepted request links to its message and attempts")

    # An admin: Sources, then the source with its URL.
    driver.find_element(By.ID, "sign-out").click()
    field = wait.until(EC.presence_of_element_located((By.NAME, "token")))
    field.send_keys(ADMIN_TOKEN)
    driver.find_element(By.XPATH, "//button[@type='submit']").click()
    wait.until(EC.visibility_of_element_located((By.ID, "nav-sources"))).click()
    heading("Ingest sources")
    driver.find_element(By.LINK_TEXT, NAME).click()
    heading(NAME)
    check("/ingest/in/" in body_text(), "an admin sees the source's URL")
    print("portal ingest check passed")
finally:
    driver.quit()
